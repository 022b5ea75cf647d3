//! Attaching a set: its components (fetched and verified, or the
//! worker's own), its seams started, and for a message carrier the control
//! verbs answered and, for `nats`, the sessions served on `--address`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use sha2::Digest;
use switchyard_carrier::client::Carrier;
use switchyard_carrier::control::{CarrierControl, subscribe_control_on_carrier};
use switchyard_carrier::dialled::SessionServer;
use switchyard_carrier::set::{self, SetEnv, Side, SideKind, StreamsVia};
use switchyard_carrier::{ComponentSpec, ControlSeam, SetName};
use switchyard_protocol::carrier::{ComponentRef, SetRef};

use super::{CarrierLink, Direct, NATS_CONNECT, NO_ADDRESS, Probe, Role, Running, cannot_follow};
use crate::identity::Identity;
use crate::services::InFlight;

impl CarrierLink {
    /// Starts one set's worker side.
    pub(super) async fn attach(
        &mut self,
        set: &SetRef,
        role: Role,
        identity: &Identity,
    ) -> Result<Running, String> {
        let Some(name) = SetName::parse(&set.carrier) else {
            return Err(format!(
                "this worker does not run the carrier set `{}`; it runs {}",
                set.carrier,
                SetName::names()
            ));
        };
        if name == SetName::Nats {
            // Checked before fetching: nothing to fetch for a set this
            // worker could not serve.
            if let Some(reason) = cannot_follow(
                self.address.as_deref(),
                self.effective_nats_url().as_deref(),
                &BTreeMap::new(),
            )
            .remove(name.as_str())
            {
                return Err(reason);
            }
        }
        let components = self.components(name, set, identity).await?;
        let env = SetEnv {
            runtime: self.runtime.clone(),
            components,
            nats_url: self.effective_nats_url(),
        };
        let seams = set::start(name, &env, Side::Worker).map_err(|e| e.to_string())?;
        let in_flight = InFlight::default();
        let mut running = Running {
            name,
            role,
            released_at: None,
            in_flight: in_flight.clone(),
            probe: None,
            // Lanes this worker dials (`tunnel`); a `nats` set's sessions
            // are dialled to it instead.
            tunnel: match name.entry().streams {
                StreamsVia::Tunnel(_) => seams.tunnel.clone().map(|spec| (spec, Arc::default())),
                StreamsVia::Dialled(_) => None,
            },
            tasks: Vec::new(),
        };
        if let Some(carrier) = seams.messages {
            if let (StreamsVia::Dialled(_), Some(spec)) = (name.entry().streams, &seams.tunnel) {
                self.serve_direct(identity, spec.clone()).await?;
            }
            self.serve_control(&carrier, identity, &mut running).await?;
            running.probe = Some(Probe::Messages(carrier));
        }
        if let Some((_, lanes)) = &running.tunnel {
            // Dialled by `dial_newest`: one set's lanes at a time.
            running.probe = Some(Probe::Lanes(lanes.clone()));
        }
        Ok(running)
    }

    /// Waits for a message carrier to connect, then answers this node's
    /// control verbs on it.
    async fn serve_control(
        &self,
        carrier: &Arc<Carrier>,
        identity: &Identity,
        running: &mut Running,
    ) -> Result<(), String> {
        if !carrier.wait_ready(NATS_CONNECT).await {
            return Err(format!(
                "the `{}` carrier did not connect within {} s",
                carrier.name(),
                NATS_CONNECT.as_secs()
            ));
        }
        // Subscribed before the set counts as attached: a frontend's
        // first call must find this worker answering. Two versions of a
        // set both answer; a frontend takes the first answer.
        let control = running.in_flight.control(self.node.control());
        let serve = subscribe_control_on_carrier(carrier.clone(), &identity.node_id, control)
            .await
            .map_err(|e| format!("control verbs are not served on the carrier: {e}"))?;
        running.tasks.push(tokio::spawn(serve));
        // A SUB is not acknowledged: a `ping` to itself on the same
        // connection comes back only once the server has it, so a
        // frontend's call after this finds a responder.
        CarrierControl::new(carrier.clone())
            .call(&identity.node_id, "ping", bytes::Bytes::new(), NATS_CONNECT)
            .await
            .map_err(|e| format!("control verbs do not answer on the carrier: {e}"))?;
        Ok(())
    }

    /// The set's components: fetched as the news names them, else this
    /// worker's own; a failure is kept for `cannot_follow`.
    async fn components(
        &mut self,
        name: SetName,
        set: &SetRef,
        identity: &Identity,
    ) -> Result<Vec<ComponentSpec>, String> {
        let resolved = match (set.components.as_slice(), &self.plugins) {
            ([], None) => Err(
                "the frontend names no carrier components and this worker has no \
                 --carrier-plugins"
                    .to_string(),
            ),
            ([], Some(plugins)) => own_components(plugins, name),
            (named, _) => self.fetch(named, identity).await,
        };
        let components = match resolved {
            Ok(components) => {
                self.component_errors.remove(name.as_str());
                components
            }
            Err(e) => {
                self.component_errors
                    .insert(name.as_str().to_string(), e.clone());
                return Err(e);
            }
        };
        Ok(components)
    }

    async fn fetch(
        &self,
        named: &[ComponentRef],
        identity: &Identity,
    ) -> Result<Vec<ComponentSpec>, String> {
        let mut components = Vec::new();
        for wanted in named {
            let component = self
                .cache
                .get(identity, wanted)
                .await
                .map_err(|e| format!("{}@{}: {e}", wanted.name, wanted.version))?;
            components.push(component);
        }
        Ok(components)
    }

    /// Serves sessions on the worker's own address (the frontend dials
    /// it), once for every `nats` set: a second version of the set shares
    /// it, and the sessions dialled from then on run its `tunnel`.
    async fn serve_direct(
        &mut self,
        identity: &Identity,
        tunnel: ComponentSpec,
    ) -> Result<(), String> {
        if let Some(direct) = self.direct.as_ref().filter(|d| !d.task.is_finished()) {
            direct.server.set_component(tunnel);
            return Ok(());
        }
        let address = self.address.clone().ok_or(NO_ADDRESS)?;
        let listener = tokio::net::TcpListener::bind(&address)
            .await
            .map_err(|e| format!("cannot serve streams on {address}: {e}"))?;
        tracing::info!(%address, "serving stream sessions");
        let key = switchyard_carrier::direct::stream_key(&sha2::Sha256::digest(
            identity.credential.as_bytes(),
        ));
        let in_flight = InFlight::default();
        let acceptor = self.node.acceptor_counted(in_flight.clone());
        let server = SessionServer::new(self.runtime.clone(), key, tunnel, acceptor);
        self.direct = Some(Direct {
            task: tokio::spawn(server.clone().serve(listener)),
            server,
            in_flight,
        });
        Ok(())
    }
}

/// The worker's own folder's components, for a frontend whose news names
/// none (an older frontend).
fn own_components(plugins: &Path, set: SetName) -> Result<Vec<ComponentSpec>, String> {
    set.entry()
        .components(SideKind::Worker)
        .into_iter()
        .map(|needed| {
            let path = plugins.join(format!("{}.wasm", needed.name));
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(ComponentSpec::new(needed.name, "local", bytes))
        })
        .collect()
}
