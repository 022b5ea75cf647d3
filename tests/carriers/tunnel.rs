//! The `tunnel` component driven by the host's session driver over a real
//! websocket on loopback, with the worker's own services.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::ComponentSpec;
use switchyard_carrier::control::{ControlSeam, StreamControl};
use switchyard_carrier::stream_seam::{Acceptor, Lane as SeamLane, StreamsSeam};
use switchyard_carrier::tunnel::Lane;
use switchyard_carrier::tunnel::TunnelRegistry;
use switchyard_carrier::{ControlError, Refusal, Stream, StreamError};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_tests::tunnel::{pair, pair_of, spec, spec_v0_1};
use switchyard_worker::services;

fn runtime() -> Arc<Runtime> {
    Runtime::new(RuntimeConfig::for_carriers(None)).expect("runtime")
}

fn worker_services() -> Acceptor {
    services::acceptor(services::control_verbs())
}

async fn send_all(stream: Stream, data: Bytes) -> Result<Vec<u8>, StreamError> {
    let Stream {
        mut reader,
        mut writer,
    } = stream;
    let writing = tokio::spawn(async move {
        // Several writes, so frames and credit interleave.
        for chunk in data.chunks(3 * 1024 * 1024 + 7) {
            writer.write(Bytes::copy_from_slice(chunk)).await?;
        }
        writer.finish();
        Ok::<_, StreamError>(())
    });
    let answer = reader.read_to_end(usize::MAX).await;
    writing.await.expect("writer task")?;
    answer
}

fn pattern(len: usize) -> Bytes {
    (0..len)
        .map(|i| (i * 7 % 256) as u8)
        .collect::<Vec<_>>()
        .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_carries_32_mib_both_ways_on_each_lane() {
    let runtime = runtime();
    for lane in [Lane::Inference, Lane::Bulk] {
        let (frontend, _worker) = pair(&runtime, lane, worker_services()).await;
        let data = pattern(32 * 1024 * 1024);
        let stream = frontend.open("echo").await.expect("echo accepted");
        let echoed = send_all(stream, data.clone()).await.expect("echo");
        assert_eq!(echoed.len(), data.len(), "{lane:?}");
        assert!(
            echoed == data,
            "{lane:?}: the echo differs from what was sent"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_close_passes_one_end_while_the_other_direction_goes_on() {
    let runtime = runtime();
    let (frontend, _worker) = pair(&runtime, Lane::Bulk, worker_services()).await;
    // sink answers only after our end: its answer travels after our FIN.
    let stream = frontend.open("sink").await.expect("sink accepted");
    let answer = send_all(stream, pattern(5 * 1024 * 1024 + 3))
        .await
        .expect("sink");
    assert_eq!(answer, (5 * 1024 * 1024 + 3).to_string().as_bytes());
    // source: we finish first (the request), it goes on sending.
    let Stream {
        mut reader,
        mut writer,
    } = frontend.open("source").await.expect("source accepted");
    writer.write(Bytes::from("9000001")).await.expect("request");
    writer.finish();
    let mut total = 0;
    while let Some(chunk) = reader.read().await {
        total += chunk.expect("source data").len();
    }
    assert_eq!(total, 9_000_001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_keep_their_kinds() {
    refusals_keep_their_kinds_with(&spec()).await;
}

/// The tunnel world's 0.1.0 components still load, and their answers mean
/// what 0.2.0's do (its `open` refused with a string the host reads once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_0_1_0_components_still_load_and_keep_refusal_kinds() {
    let runtime = runtime();
    let (frontend, _worker) = pair_of(&runtime, &spec_v0_1(), Lane::Bulk, worker_services()).await;
    let stream = frontend.open("echo").await.expect("echo accepted");
    let echoed = send_all(stream, pattern(1024 * 1024 + 1))
        .await
        .expect("echo");
    assert_eq!(echoed, pattern(1024 * 1024 + 1));
    refusals_keep_their_kinds_with(&spec_v0_1()).await;
}

/// A side at its stream limit refuses to open more as overloaded: 0.2.0's
/// `open` says so as a variant, 0.1.0's in words the host maps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_past_the_stream_limit_is_overloaded_in_both_versions() {
    let runtime = runtime();
    for spec in [spec(), spec_v0_1()] {
        let (frontend, _worker) =
            pair_of(&runtime, &spec, Lane::Inference, worker_services()).await;
        // Streams stay open while held; the plugin's limit is a few hundred.
        let mut held = Vec::new();
        let refusal = loop {
            match frontend.open("echo").await {
                Ok(stream) => held.push(stream),
                Err(refusal) => break refusal,
            }
            assert!(held.len() < 10_000, "no stream limit");
        };
        assert_eq!(
            refusal,
            Refusal::Overloaded,
            "{}@{}",
            spec.name,
            spec.version
        );
        assert!(!held.is_empty());
    }
}

async fn refusals_keep_their_kinds_with(spec: &ComponentSpec) {
    let runtime = runtime();
    let picky: Acceptor = Arc::new(|service: &str, _stream: Stream| match service {
        "busy" => Err(Refusal::ServiceRefused("draining".into())),
        "full" => Err(Refusal::Overloaded),
        _ => Err(Refusal::UnknownService),
    });
    let (frontend, worker) = pair_of(&runtime, spec, Lane::Inference, picky).await;
    assert_eq!(
        frontend.open("nothing").await.err(),
        Some(Refusal::UnknownService)
    );
    assert_eq!(
        frontend.open("busy").await.err(),
        Some(Refusal::ServiceRefused("draining".into()))
    );
    assert_eq!(frontend.open("full").await.err(), Some(Refusal::Overloaded));
    // The worker goes away: an open that never reached it says so.
    worker.close();
    frontend.lost().await;
    assert!(matches!(
        frontend.open("echo").await.err(),
        Some(Refusal::NotDelivered(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_session_resets_open_streams() {
    let runtime = runtime();
    let (frontend, worker) = pair(&runtime, Lane::Inference, worker_services()).await;
    let Stream {
        mut reader,
        writer: _writer,
    } = frontend.open("echo").await.expect("echo accepted");
    worker.close();
    match reader.read().await {
        Some(Err(StreamError::Reset(_))) => {}
        other => panic!("expected a reset, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_verbs_travel_as_streams_with_deadlines_and_typed_refusals() {
    let runtime = runtime();
    let (frontend, _worker) = pair(&runtime, Lane::Inference, worker_services()).await;
    let registry = Arc::new(TunnelRegistry::default());
    registry.insert("node-a", SeamLane::Inference, frontend);
    let control = StreamControl::new(registry.clone() as Arc<dyn StreamsSeam>);
    let deadline = Duration::from_secs(5);
    assert_eq!(
        control.call("node-a", "ping", Bytes::new(), deadline).await,
        Ok(Bytes::from("pong"))
    );
    assert_eq!(
        control
            .call("node-a", "echo", Bytes::from("payload"), deadline)
            .await,
        Ok(Bytes::from("payload"))
    );
    match control
        .call("node-a", "format", Bytes::new(), deadline)
        .await
    {
        Err(ControlError::Refused(refusal)) => assert_eq!(refusal.code, "unknown_verb"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        control
            .call(
                "node-a",
                "sleep",
                Bytes::from("2000"),
                Duration::from_millis(100)
            )
            .await,
        Err(ControlError::Timeout)
    );
    assert!(matches!(
        control.call("node-b", "ping", Bytes::new(), deadline).await,
        Err(ControlError::NotDelivered(_))
    ));
}
