//! The `nats` set's streams: tunnel sessions over TCP connections the
//! frontend dials to a worker's stream address, with the real `tunnel`
//! component on both ends, the worker's own services, and a TCP forwarder
//! a test can cut.

use std::sync::Arc;

use bytes::Bytes;
use switchyard_carrier::dialled::{DialledSessions, SessionServer};
use switchyard_carrier::direct::{NodeAddress, Resolver, stream_key};
use switchyard_carrier::stream_seam::{Acceptor, Lane, StreamsSeam};
use switchyard_carrier::{Refusal, Stream, StreamError};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_tests::federation::eventually;
use switchyard_tests::proxy::TcpProxy;
use switchyard_tests::tunnel::spec;
use switchyard_worker::services;

const NODE: &str = "node_dialled";

/// The worker's services, and two that refuse.
fn worker_services() -> Acceptor {
    let served = services::acceptor(services::control_verbs());
    Arc::new(move |service: &str, stream: Stream| match service {
        "busy" => Err(Refusal::ServiceRefused("draining".into())),
        _ => served(service, stream),
    })
}

/// A worker's sessions listener on loopback, and its address.
async fn worker(runtime: &Arc<Runtime>, key: [u8; 32]) -> (Arc<SessionServer>, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let server = SessionServer::new(runtime.clone(), key, spec(), worker_services());
    tokio::spawn(server.clone().serve(listener));
    (server, address)
}

/// The frontend's seam, dialling `address` for every node with `key`.
fn frontend(runtime: &Arc<Runtime>, address: String, key: [u8; 32]) -> DialledSessions {
    let resolve: Resolver = Arc::new(move |_node: String| {
        let address = address.clone();
        Box::pin(async move { Ok(NodeAddress { address, key }) })
    });
    DialledSessions::new(runtime.clone(), spec(), resolve)
}

fn runtime() -> Arc<Runtime> {
    Runtime::new(RuntimeConfig::for_carriers(None)).expect("runtime")
}

async fn echo(streams: &DialledSessions, lane: Lane, tag: String) -> Vec<u8> {
    let Stream {
        mut reader,
        mut writer,
    } = streams
        .open(NODE, lane, "echo")
        .await
        .unwrap_or_else(|e| panic!("echo {tag}: {e}"));
    writer.write(Bytes::from(tag)).await.unwrap();
    writer.finish();
    reader.read_to_end(1024).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_streams_to_one_worker_ride_one_connection_per_lane() {
    let runtime = runtime();
    let key = stream_key(&[3u8; 32]);
    let (server, address) = worker(&runtime, key).await;
    let streams = frontend(&runtime, address, key);

    // Opened all at once: they share one dial.
    let answers = futures::future::join_all(
        (0..32).map(|i| echo(&streams, Lane::Inference, format!("stream {i}"))),
    )
    .await;
    for (i, answer) in answers.into_iter().enumerate() {
        assert_eq!(answer, format!("stream {i}").as_bytes());
    }
    let mut reader = streams
        .call(NODE, Lane::Inference, "echo", Bytes::from_static(b"a call"))
        .await
        .unwrap();
    assert_eq!(reader.read_to_end(1024).await.unwrap(), b"a call");
    assert_eq!(
        server.accepted(),
        1,
        "one connection for the inference lane"
    );

    // The bulk lane is a session of its own.
    assert_eq!(echo(&streams, Lane::Bulk, "bulk".into()).await, b"bulk");
    assert_eq!(server.accepted(), 2);
    assert_eq!(server.sessions(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_service_is_refused_on_the_session_while_other_streams_go_on() {
    let runtime = runtime();
    let key = stream_key(&[4u8; 32]);
    let (server, address) = worker(&runtime, key).await;
    let streams = frontend(&runtime, address, key);

    let Stream {
        mut reader,
        mut writer,
    } = streams.open(NODE, Lane::Inference, "echo").await.unwrap();
    writer.write(Bytes::from_static(b"before ")).await.unwrap();
    assert_eq!(
        streams.open(NODE, Lane::Inference, "nothing").await.err(),
        Some(Refusal::UnknownService)
    );
    assert_eq!(
        streams.open(NODE, Lane::Inference, "busy").await.err(),
        Some(Refusal::ServiceRefused("draining".into()))
    );
    writer.write(Bytes::from_static(b"after")).await.unwrap();
    writer.finish();
    assert_eq!(reader.read_to_end(1024).await.unwrap(), b"before after");
    assert_eq!(server.accepted(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dial_without_the_key_is_not_delivered() {
    let runtime = runtime();
    let (server, address) = worker(&runtime, stream_key(&[5u8; 32])).await;
    let streams = frontend(&runtime, address, stream_key(&[6u8; 32]));
    assert!(matches!(
        streams.open(NODE, Lane::Inference, "echo").await,
        Err(Refusal::NotDelivered(_))
    ));
    assert_eq!(server.sessions(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_resets_its_streams_and_the_next_open_dials_again() {
    let runtime = runtime();
    let key = stream_key(&[7u8; 32]);
    let (server, address) = worker(&runtime, key).await;
    let proxy = TcpProxy::start(address.parse().unwrap()).await;
    let streams = frontend(&runtime, proxy.addr.to_string(), key);

    let Stream {
        mut reader,
        writer: _writer,
    } = streams.open(NODE, Lane::Inference, "echo").await.unwrap();
    proxy.cut();
    match reader.read().await {
        Some(Err(StreamError::Reset(_))) => {}
        other => panic!("expected a reset, got {other:?}"),
    }
    // The frontend may learn of the loss a moment after the stream did:
    // an open meanwhile is not delivered, and one after dials again.
    let streams = &streams;
    let answer = eventually("an open after the cut is served", || async move {
        let mut stream = streams.open(NODE, Lane::Inference, "echo").await.ok()?;
        stream
            .writer
            .write(Bytes::from_static(b"again"))
            .await
            .ok()?;
        stream.writer.finish();
        stream.reader.read_to_end(1024).await.ok()
    })
    .await;
    assert_eq!(answer, b"again");
    assert_eq!(server.accepted(), 2, "one dial again, not one per try");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_closes_its_sessions_resets_their_streams() {
    let runtime = runtime();
    let key = stream_key(&[8u8; 32]);
    let (server, address) = worker(&runtime, key).await;
    let streams = frontend(&runtime, address, key);
    let Stream {
        mut reader,
        writer: _writer,
    } = streams.open(NODE, Lane::Inference, "echo").await.unwrap();
    server.close();
    match reader.read().await {
        Some(Err(StreamError::Reset(_))) => {}
        other => panic!("expected a reset, got {other:?}"),
    }
}
