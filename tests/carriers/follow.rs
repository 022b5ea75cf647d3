//! A worker following the cluster's carrier news (issue 10, "Workers
//! follow"), in one process against a real nats-server: its carrier link
//! runs `nats@0.1.0`, then a second build beside it (a component upgrade:
//! two versions of one set, sharing the worker's one streams listener),
//! lets go of an aborted target, and closes the old version once the
//! change settled and nothing runs on it, serving control verbs and
//! streams throughout. The frontend's side is the catalog's own `nats` set.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sha2::Digest;
use switchyard_carrier::direct::{NodeAddress, stream_key};
use switchyard_carrier::set::{self, Frontend, SetEnv, Side};
use switchyard_carrier::stream_seam::Lane;
use switchyard_carrier::{ComponentSpec, ControlSeam, SetName, StreamsSeam, TunnelRegistry};
use switchyard_protocol::carrier::{CarrierNews, ComponentRef, SetRef};
use switchyard_protocol::state::CarrierRowState;
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_tests::nats::NatsServer;
use switchyard_tests::plugins::{component, sha256};
use switchyard_tests::switch::second_build;
use switchyard_worker::carrier::{CarrierLink, SetKey};
use switchyard_worker::components::ComponentCache;
use switchyard_worker::engines::EngineBinaries;
use switchyard_worker::identity::Identity;
use switchyard_worker::node::{EngineStartPolicy, Node};
use switchyard_worker::placement::Placement;

const WAIT: Duration = Duration::from_secs(10);
const NODE: &str = "node_follow";

/// The `nats` set with this build of the `nats` component, and the
/// tunnel component its stream sessions run.
fn nats_set(version: &str, bytes: &[u8]) -> SetRef {
    SetRef {
        carrier: "nats".into(),
        components: vec![
            ComponentRef {
                name: "nats".into(),
                version: version.into(),
                sha256: sha256(bytes),
            },
            ComponentRef {
                name: "tunnel".into(),
                version: "0.2.0".into(),
                sha256: sha256(&component("tunnel")),
            },
        ],
    }
}

fn news(epoch: i64, state: CarrierRowState, active: &SetRef, url: &str) -> CarrierNews {
    CarrierNews {
        carrier: active.carrier.clone(),
        epoch,
        state,
        components: active.components.clone(),
        target: None,
        draining: None,
        nats_url: Some(url.to_string()),
        attach_jitter_ms: Some(0),
        max_drain_ms: Some(600_000),
    }
}

/// A control verb and a stream both reach the worker.
async fn serves(control: &Arc<dyn ControlSeam>, streams: &Arc<dyn StreamsSeam>, tag: &str) {
    let answer = control
        .call(NODE, "echo", Bytes::from(tag.to_string()), WAIT)
        .await
        .unwrap_or_else(|e| panic!("control at {tag}: {e}"));
    assert_eq!(answer, tag.as_bytes());
    let mut stream = streams
        .open(NODE, Lane::Inference, "echo")
        .await
        .unwrap_or_else(|e| panic!("stream at {tag}: {e}"));
    stream
        .writer
        .write(Bytes::from(tag.to_string()))
        .await
        .unwrap();
    stream.writer.finish();
    assert_eq!(
        stream.reader.read_to_end(1024).await.unwrap(),
        tag.as_bytes()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_runs_two_nats_versions_side_by_side_and_closes_the_old_one_after_the_change() {
    let server = NatsServer::start(&[]);
    let url = server.address();
    let old_bytes = component("nats");
    let new_bytes = second_build(&old_bytes, "0.2.0");
    let (old, new) = (nats_set("0.1.0", &old_bytes), nats_set("0.2.0", &new_bytes));

    // The worker: its components already kept (what a fetch leaves), a
    // loopback address for streams.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("components")).unwrap();
    let tunnel_bytes = component("tunnel");
    for bytes in [&old_bytes, &new_bytes, &tunnel_bytes] {
        let path = dir
            .path()
            .join(format!("components/{}.wasm", sha256(bytes)));
        std::fs::write(path, bytes).unwrap();
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let node = Node::new(
        Placement::open(&dir.path().join("models"), 0).unwrap(),
        EngineBinaries::default(),
        EngineStartPolicy::default(),
    );
    // No --nats-url of its own: the news's URL serves.
    let mut link = CarrierLink::new(
        runtime.clone(),
        ComponentCache::new(dir.path()),
        None,
        Some(address.clone()),
        None,
        node,
    );
    let identity = Identity {
        node_id: NODE.into(),
        credential: "c".repeat(43),
        frontend: "http://127.0.0.1:1".into(),
    };

    // The frontend's side of the set.
    let key = stream_key(&sha2::Sha256::digest(identity.credential.as_bytes()));
    let frontend = Frontend {
        database_url: None,
        sessions: Arc::new(TunnelRegistry::default()),
        resolve: Arc::new(move |_node: String| {
            let address = address.clone();
            Box::pin(async move { Ok(NodeAddress { address, key }) })
        }),
    };
    let env = SetEnv {
        runtime,
        components: vec![
            ComponentSpec::new("nats", "0.1.0", old_bytes.clone()),
            ComponentSpec::new("tunnel", "0.2.0", tunnel_bytes.clone()),
        ],
        nats_url: Some(url.clone()),
    };
    let seams = set::start(SetName::Nats, &env, Side::Frontend(frontend)).unwrap();
    assert!(seams.messages.as_ref().unwrap().wait_ready(WAIT).await);
    let (control, streams) = (seams.control.unwrap(), seams.streams.unwrap());
    let running = |link: &CarrierLink| {
        let mut keys = link.running();
        keys.sort();
        keys
    };
    let (key_old, key_new) = (SetKey::of(&old), SetKey::of(&new));
    let both = {
        let mut both = vec![key_old.clone(), key_new.clone()];
        both.sort();
        both
    };

    let stable = news(1, CarrierRowState::Stable, &old, &url);
    link.follow(&stable, &identity).await;
    let report = link.status().attachment();
    assert_eq!(
        (report.attached.as_slice(), report.epoch_seen),
        (&["nats".to_string()][..], Some(1))
    );
    assert!(
        report.cannot_follow.is_empty(),
        "{:?}",
        report.cannot_follow
    );
    serves(&control, &streams, "stable").await;

    // Prepare: the second build runs beside the first (its streams share
    // the one listener: a second bind of the address would fail the attach).
    let mut prepare = news(2, CarrierRowState::Prepare, &old, &url);
    prepare.target = Some(new.clone());
    link.follow(&prepare, &identity).await;
    assert_eq!(running(&link), both);
    assert_eq!(link.status().attachment().epoch_seen, Some(2));
    serves(&control, &streams, "prepare").await;

    // Abort: the target goes (nothing runs on it, the active set is connected).
    link.follow(&news(3, CarrierRowState::Stable, &old, &url), &identity)
        .await;
    assert_eq!(running(&link), std::slice::from_ref(&key_old));
    serves(&control, &streams, "aborted").await;

    // Again, to commit: both run while the old one drains.
    prepare.epoch = 4;
    link.follow(&prepare, &identity).await;
    let mut commit = news(5, CarrierRowState::Commit, &new, &url);
    commit.draining = Some(old.clone());
    link.follow(&commit, &identity).await;
    assert_eq!(running(&link), both);

    // A stream that began before the settle outlives the old set.
    let mut open = streams.open(NODE, Lane::Inference, "echo").await.unwrap();
    open.writer
        .write(Bytes::from_static(b"before"))
        .await
        .unwrap();
    link.follow(&news(6, CarrierRowState::Stable, &new, &url), &identity)
        .await;
    assert_eq!(running(&link), [key_new]);
    open.writer
        .write(Bytes::from_static(b"-after"))
        .await
        .unwrap();
    open.writer.finish();
    assert_eq!(
        open.reader.read_to_end(1024).await.unwrap(),
        b"before-after"
    );
    let report = link.status().attachment();
    assert_eq!(
        (report.attached.as_slice(), report.epoch_seen),
        (&["nats".to_string()][..], Some(6))
    );
    serves(&control, &streams, "settled").await;
}
