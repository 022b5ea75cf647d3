//! What federation asks of the server, as its four ports
//! (`switchyard_federation::ports`): the grant evaluator in force
//! ([`Judge`]), the links' tunnel component and relay ([`Transport`]), the
//! model library's blobs ([`Blobs`]), each built from the handles it needs,
//! and this cluster's own chains and `/v1` path ([`Local`]), the one that
//! reaches the whole state. Federation itself lives in
//! `switchyard-federation`; the routes only call it.

use std::sync::{Arc, OnceLock, Weak};

use futures::future::BoxFuture;
use switchyard_carrier::ComponentSpec;
use switchyard_carrier::tunnel::Relay;
use switchyard_federation::{
    BlobStore, Denied, Federation, FederationConfig, GrantJudge, LinkTransport, LocalAnswer,
    LocalCall, LocalService, Ports,
};
use switchyard_runtime::Runtime;
use switchyard_runtime::grant::{Charge, FederatedCall, Grant, Usage};
use switchyard_store::Store;

use crate::config::ServeConfig;
use crate::state::AppState;
use switchyard_binding::grant_evaluator::GrantEvaluator;
use switchyard_carrier_set::Carriers;
use switchyard_library::Library;

/// The grant evaluator, as federation's judge.
struct Judge(Arc<GrantEvaluator>);

impl GrantJudge for Judge {
    fn judge(
        &self,
        call: FederatedCall,
        grant: Grant,
        usage: Usage,
    ) -> BoxFuture<'static, Result<Charge, Denied>> {
        let evaluator = self.0.clone();
        Box::pin(async move {
            evaluator
                .judge(call, grant, usage)
                .await
                .map_err(|refusal| Denied {
                    status: 403,
                    code: refusal.code,
                    message: refusal.message,
                })
        })
    }
}

/// The carriers' tunnel component and the replicas' relay, for links.
struct Transport {
    carriers: Option<Arc<Carriers>>,
    relay: Relay,
}

impl LinkTransport for Transport {
    fn tunnel(&self) -> Option<(Arc<Runtime>, ComponentSpec)> {
        let carriers = self.carriers.as_ref()?;
        let spec = carriers.tunnel.load_full()?;
        Some((carriers.runtime.clone(), (*spec).clone()))
    }

    fn relay(&self) -> Option<Relay> {
        Some(self.relay.clone())
    }
}

/// The model library, for copies.
struct Blobs {
    library: Library,
    store: Store,
    instance_id: String,
}

impl BlobStore for Blobs {
    fn partial_dir(&self) -> std::path::PathBuf {
        self.library.partial_dir()
    }

    fn has_blob(&self, sha256: &str, size: u64) -> bool {
        self.library.has(sha256, size)
    }

    fn adopt_blob(&self, sha256: &str, from: &std::path::Path) -> std::io::Result<()> {
        self.library.adopt(sha256, from)
    }

    fn blob_for_range(
        &self,
        sha256: String,
        size: u64,
    ) -> BoxFuture<'static, Result<std::path::PathBuf, String>> {
        let (library, store, instance_id) = (
            self.library.clone(),
            self.store.clone(),
            self.instance_id.clone(),
        );
        Box::pin(async move {
            switchyard_library::ensure_blob(&library, &store, &instance_id, &sha256, size)
                .await
                .map_err(|e| e.to_string())?;
            Ok(library.blob_path(&sha256))
        })
    }
}

/// This cluster's own chains, `/v1` path and batches, for what a peer's
/// grant admits: the one port that needs the whole state (the inference
/// core reads admission, routing, carriers and the store), reached through
/// a weak pointer since the state holds the federation that holds this.
pub struct Local {
    state: OnceLock<Weak<AppState>>,
}

impl Local {
    /// Lets the port reach the state it serves calls with.
    pub fn attach(&self, state: &Arc<AppState>) {
        let _ = self.state.set(Arc::downgrade(state));
    }

    /// The state, unless the replica is shutting down (it is gone).
    fn state(&self) -> Result<Arc<AppState>, Denied> {
        self.state
            .get()
            .and_then(Weak::upgrade)
            .ok_or_else(|| Denied {
                status: 503,
                code: "shutting_down".into(),
                message: "this replica is shutting down".into(),
            })
    }
}

impl LocalService for Local {
    fn serve(&self, call: LocalCall) -> BoxFuture<'static, Result<LocalAnswer, Denied>> {
        let state = self.state();
        Box::pin(async move {
            let state = state?;
            let (answer, admitted) =
                switchyard_inference::serve_federated(&state.inference, call).await;
            Ok(LocalAnswer { answer, admitted })
        })
    }

    fn admit(
        &self,
        peer: String,
        grant: String,
        service: String,
        model: Option<String>,
    ) -> BoxFuture<'static, Result<(), Denied>> {
        let state = self.state();
        Box::pin(async move {
            let state = state?;
            let record = switchyard_runtime::admission::FederationRequest {
                peer,
                grant_id: grant,
                service,
                model,
                prompt_tokens: 0,
                max_tokens: None,
            };
            match switchyard_inference::federation_chain(&state.inference, record).await {
                Ok(_) => Ok(()),
                Err(e) => Err(Denied {
                    status: 403,
                    code: e.code().to_string(),
                    message: e.to_string(),
                }),
            }
        })
    }

    fn admit_transfer(
        &self,
        request: switchyard_runtime::admission::TransferRequest,
    ) -> BoxFuture<'static, Result<(), Denied>> {
        let state = self.state();
        Box::pin(async move { transfer_chain(&*state?, request).await })
    }

    fn job(
        &self,
        job: switchyard_federation::LocalJob,
    ) -> BoxFuture<'static, Result<switchyard_protocol::answer::Answer, Denied>> {
        let state = self.state();
        Box::pin(async move { crate::jobs::serve_peer(&*state?, job).await })
    }

    fn end_grant_jobs(&self, grant: String) -> BoxFuture<'static, ()> {
        let state = self.state();
        Box::pin(async move {
            if let Ok(state) = state {
                crate::jobs::end_grant_jobs(&state, &grant).await;
            }
        })
    }
}

/// What the ports other than [`Local`] are built from.
pub struct PortParts {
    /// The grant evaluator in force.
    pub evaluator: Arc<GrantEvaluator>,
    /// This replica's carriers (the tunnel component), if it runs any.
    pub carriers: Option<Arc<Carriers>>,
    /// The model library.
    pub library: Library,
}

/// Asks the `transfer` chain about one file of a model copy: a deny
/// stops the copy with the policy's code. (A transfer patch's rate limit
/// is not applied to copies.)
async fn transfer_chain(
    state: &AppState,
    request: switchyard_runtime::admission::TransferRequest,
) -> Result<(), Denied> {
    use switchyard_runtime::admission::{AdmissionPoint, AdmissionRequest, Decision};
    let chain = state.admission.chain(AdmissionPoint::Transfer);
    if chain.entries.is_empty() {
        return Ok(());
    }
    let record = AdmissionRequest::Transfer(request);
    let verdict = state.admission.judge(record).await.map_err(|e| Denied {
        status: 500,
        code: "internal".into(),
        message: format!("the transfer chain did not run: {e}"),
    })?;
    match verdict.decision {
        Decision::Deny(denial) => Err(Denied {
            status: 403,
            code: denial.code,
            message: denial.message,
        }),
        _ => Ok(()),
    }
}

/// Starts this replica's federation: the identity (made on a new cluster,
/// whose first join token is printed once, with the command that joins).
pub async fn start(
    config: &ServeConfig,
    store: &Store,
    instance_id: &str,
    advertise: &str,
    hostname: &str,
    parts: PortParts,
) -> anyhow::Result<(Arc<Federation>, Arc<Local>)> {
    let PortParts {
        evaluator,
        carriers,
        library,
    } = parts;
    let relay =
        switchyard_carrier_set::relay::link_relay(store.clone(), instance_id.to_string()).await?;
    let local = Arc::new(Local {
        state: OnceLock::new(),
    });
    let ports = Ports {
        judge: Arc::new(Judge(evaluator)),
        local: local.clone(),
        links: Arc::new(Transport { carriers, relay }),
        blobs: Arc::new(Blobs {
            library,
            store: store.clone(),
            instance_id: instance_id.to_string(),
        }),
    };
    let label =
        config.federation_label.clone().unwrap_or_else(
            || match switchyard_federation::valid_label(hostname) {
                true => hostname.to_string(),
                false => "switchyard".into(),
            },
        );
    let federation_config = FederationConfig {
        key_path: config
            .federation_key
            .clone()
            .unwrap_or_else(|| switchyard_federation::identity::default_key_path(&config.data_dir)),
        label,
        url: advertise.to_string(),
        instance_id: instance_id.to_string(),
    };
    let (federation, first_token) = Federation::start(store.clone(), federation_config, ports)
        .await
        .map_err(|e| anyhow::anyhow!("federation: {e}"))?;
    if let Some(token) = first_token {
        // Printed on stdout, once, never logged.
        println!(
            "federation join token (shown once; rotate with `switchyard federation token --rotate`): {token}"
        );
        println!(
            "join this cluster from another: switchyard federation join --url {advertise} --token {token} --label {}",
            federation.identity().label
        );
    }
    Ok((federation, local))
}
