//! The reactor with a real nats component: payloads kept and released,
//! and rebuilds with backoff.

use std::path::PathBuf;

use sha2::Digest;
use switchyard_runtime::RuntimeConfig;
use switchyard_runtime::carrier::{Body, Cell, Delivery, Param, Payload};

use super::bypass::bind_payloads;
use super::*;
use crate::payloads::PayloadError;

/// The built nats component (scripts/build-guests.sh) and its digest.
fn nats_component() -> (Arc<[u8]>, String) {
    let dir = std::env::var_os("SWITCHYARD_PLUGINS_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(|t| PathBuf::from(t).join("plugins")))
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/plugins"));
    let path = dir.join("nats.wasm");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build the guests first (scripts/build-guests.sh)",
            path.display()
        )
    });
    let sha256 = hex::encode(sha2::Sha256::digest(&bytes));
    (bytes.into(), sha256)
}

/// Waits (in tokio's clock) until `n` rebuilds in a row have failed.
async fn failed_rebuilds(counters: &Counters, n: u64) {
    let started = tokio::time::Instant::now();
    while counters.failed_rebuilds.load(Ordering::Relaxed) < n {
        assert!(
            started.elapsed() < REBUILD_BACKOFF_MAX * 2,
            "no rebuild retry ran"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A reactor on the nats plugin, with nothing dialled, and its counters.
fn reactor_with(bytes: Arc<[u8]>, sha256: String) -> (Arc<Core>, Arc<Counters>) {
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let component = ComponentSpec {
        name: "nats".into(),
        version: "test".into(),
        bytes,
        sha256,
    };
    let setup = CarrierSetup {
        config: r#"{"servers": ["127.0.0.1:9"]}"#.into(),
        database_url: None,
        // Nothing is dialled: the tests are about the plugin, not its connection.
        allowed_endpoints: Vec::new(),
    };
    let (ready, _ready) = watch::channel(false);
    let counters = Arc::new(Counters::default());
    let core = Core::new(|events| {
        Reactor::new(
            component,
            setup,
            runtime,
            tokio::runtime::Handle::current(),
            ready,
            counters.clone(),
            events,
        )
    });
    core.with(|engine| engine.load().map(drop))
        .expect("the first load");
    (core, counters)
}

fn reactor() -> Arc<Core> {
    let (bytes, sha256) = nats_component();
    reactor_with(bytes, sha256).0
}

fn delivery(subscription: u64, body: Body) -> Delivery {
    Delivery {
        subscription,
        subject: "jobs.1".into(),
        reply_to: None,
        headers: Vec::new(),
        body,
    }
}

#[tokio::test]
async fn a_kept_payload_outlives_its_call_and_is_delivered_once() {
    let core = reactor();
    let (handler, mut messages) = mpsc::channel(4);
    let big = Bytes::from(vec![5u8; 10_000]);
    let held = core.with(|engine| {
        engine.subscriptions.insert(
            7,
            Subscription {
                subject: "jobs.*".into(),
                queue_group: None,
                handler,
            },
        );
        // Under the plugin's inline-below: inline; over it: held.
        assert!(matches!(
            engine.payload(Bytes::from_static(b"small")),
            Payload::Inline(_)
        ));
        let Payload::Held(held) = engine.payload(big.clone()) else {
            panic!("a 10 KB payload is held for nats");
        };
        assert_eq!(held.len, 10_000);
        engine.perform(vec![Action::Keep(held.id)]);
        engine.perform(vec![Action::Deliver(delivery(7, Body::Held(held.id)))]);
        held
    });
    assert_eq!(messages.recv().await.unwrap().payload, big);
    // Used once: naming it again fails the plugin (a waiting request
    // learns why) and it is rebuilt.
    let (done, waiting) = oneshot::channel();
    core.with(|engine| {
        engine.requests.insert(1, done);
        engine.perform(vec![Action::Deliver(delivery(7, Body::Held(held.id)))]);
    });
    let failed = waiting.await.unwrap().unwrap_err().to_string();
    assert!(failed.contains("is not held"), "{failed}");
    assert!(core.with(|engine| engine.plugin.is_some()), "rebuilt");
    assert!(messages.try_recv().is_err());
}

#[tokio::test]
async fn an_unkept_payload_is_gone_after_its_call_and_a_held_cell_binds_as_bytes() {
    let core = reactor();
    core.with(|engine| {
        let Payload::Held(dropped) = engine.payload(Bytes::from(vec![1u8; 5_000])) else {
            panic!("held");
        };
        engine.perform(Vec::new());
        assert_eq!(
            engine.payloads.take(dropped.id),
            Err(PayloadError::Unknown(dropped.id))
        );

        let rows = vec![vec![Some(b"k".to_vec()), Some(b"spilled".to_vec()), None]];
        let cells = engine.cells(rows, Some(1));
        let [Some(Cell::Bytes(key)), Some(Cell::Held(cell)), None] = &cells[0][..] else {
            panic!("{cells:?}");
        };
        assert_eq!((key.as_slice(), cell.len), (&b"k"[..], 7));
        let mut params = vec![Param::Int(1), Param::Payload(cell.id)];
        bind_payloads(&mut engine.payloads, &mut params).unwrap();
        assert_eq!(params[1], Param::Bytes(b"spilled".to_vec()));
        assert!(bind_payloads(&mut engine.payloads, &mut [Param::Payload(cell.id)]).is_err());
    });
}

#[test]
fn the_rebuild_backoff_doubles_from_one_second_up_to_thirty() {
    let waits: Vec<u64> = (1..=9).map(|n| rebuild_backoff(n).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30, 30]);
    assert_eq!(rebuild_backoff(u64::MAX), REBUILD_BACKOFF_MAX);
}

#[tokio::test(start_paused = true)]
async fn a_failed_rebuild_is_retried_with_backoff_until_the_plugin_is_back() {
    let (bytes, sha256) = nats_component();
    let (core, counters) = reactor_with(bytes.clone(), sha256);

    // The component can no longer be loaded (its bytes no longer match
    // their digest): the rebuild fails and is tried again, later and later.
    core.with(|engine| {
        engine.component.bytes = Arc::from(&b"not the component"[..]);
        engine.rebuild(CallError::Trap("injected".into()));
        assert!(engine.plugin.is_none());
    });
    let state = counters.plugin_state();
    assert_eq!((state.state, state.failed_rebuilds), ("rebuilding", 1));
    assert!(
        state
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("digest")),
        "{state:?}"
    );
    assert!(state.next_retry_unix_ms.is_some());
    for (failures, wait) in [(2, 1), (3, 2), (4, 4)] {
        let started = tokio::time::Instant::now();
        failed_rebuilds(&counters, failures).await;
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(wait) && waited < Duration::from_secs(wait + 1),
            "failure {failures} after {waited:?}"
        );
    }
    assert!(core.with(|engine| engine.plugin.is_none()));

    // The component is back: the next retry rebuilds it and the state clears.
    core.with(|engine| engine.component.bytes = bytes);
    let started = tokio::time::Instant::now();
    while core.with(|engine| engine.plugin.is_none()) {
        assert!(started.elapsed() < REBUILD_BACKOFF_MAX, "not rebuilt");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(started.elapsed() >= Duration::from_secs(8));
    assert_eq!(
        counters.plugin_state(),
        PluginState {
            state: "running",
            failed_rebuilds: 0,
            last_error: None,
            next_retry_unix_ms: None,
        }
    );
}
