//! What a stranger can do with the anonymous link endpoint and the join:
//! silent websockets from one address hold at most its share of the
//! handshakes, each for the first-message deadline only, so a real peer
//! still joins; a join token expires and is spent; wrong guesses back off
//! (429); and a join to an address where no cluster answers says one thing
//! whatever answered there.

use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_federation::gate::MAX_HANDSHAKES_PER_ADDRESS;
use switchyard_federation::handshake::FIRST_MESSAGE_TIMEOUT;
use switchyard_tests::federation::{Member, eventually};
use tokio_tungstenite::tungstenite::Message;

/// A websocket to `member`'s link endpoint from the loopback address
/// `127.0.0.<last>`: the socket, or the HTTP status it was refused with.
async fn link_from(
    member: &Member,
    last: u8,
) -> Result<tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, (StatusCode, String)> {
    let target: std::net::SocketAddr = member.url().trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, last], 0)))
        .unwrap();
    let stream = socket.connect(target).await.unwrap();
    let url = format!("ws://{target}/api/federation/link?lane=inference");
    match tokio_tungstenite::client_async(url, stream).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let status = StatusCode::from_u16(response.status().as_u16()).unwrap();
            let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default());
            Err((status, body.into_owned()))
        }
        Err(e) => panic!("the link endpoint did not answer: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_websockets_from_one_address_do_not_shut_a_real_peer_out() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::bare("beta"));
    // Sixteen silent sockets from 127.0.0.2: that address gets its share.
    let opened = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..16 {
        match link_from(&beta, 2).await {
            Ok(socket) => silent.push(socket),
            Err((status, body)) => {
                assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
                assert!(body.contains("too_many_handshakes"), "{body}");
            }
        }
    }
    assert_eq!(silent.len(), MAX_HANDSHAKES_PER_ADDRESS);
    // A real peer joins meanwhile, from another address.
    alpha.join(&beta).await;
    // Each silent socket is refused and closed at the first-message
    // deadline, far sooner than the handshake's 10 s per step.
    for mut socket in silent {
        let mut refused = None;
        while let Some(Ok(message)) = socket.next().await {
            if let Message::Text(text) = message {
                refused = Some(serde_json::from_str::<Value>(&text).unwrap());
            }
        }
        let refused = refused.expect("a refusal before the close");
        assert_eq!(refused["code"], "handshake_timeout", "{refused}");
    }
    assert!(
        opened.elapsed() < FIRST_MESSAGE_TIMEOUT + Duration::from_secs(5),
        "the silent sockets were held {:?}",
        opened.elapsed()
    );
    // Once they are gone, that address may open handshakes again.
    assert!(link_from(&beta, 2).await.is_ok());
}

async fn join(alpha: &Member, beta: &Member, token: &str) -> (StatusCode, Value) {
    alpha
        .call(
            Method::POST,
            "/api/federation/peers",
            Some(json!({"url": beta.url(), "join_token": token, "label": "beta"})),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_tokens_expire_are_spent_and_wrong_guesses_back_off() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::bare("beta"));
    // A day and one use unless asked otherwise; limits are checked.
    let made = beta
        .expect(
            StatusCode::CREATED,
            Method::POST,
            "/api/federation/join-token",
            None,
        )
        .await;
    assert_eq!(made["expires_in_s"], 86_400, "{made}");
    assert_eq!(made["uses"], 1, "{made}");
    let (status, _) = beta
        .call(
            Method::POST,
            "/api/federation/join-token",
            Some(json!({"ttl_s": 5})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Expired: refused as a wrong token is.
    let token = beta.join_token().await;
    let (db, connection) =
        tokio_postgres::connect(&beta.cluster.database_url, tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    db.execute(
        "UPDATE federation_identity SET join_token_expires_at = now() - interval '1 second'",
        &[],
    )
    .await
    .unwrap();
    let (status, refused) = join(&alpha, &beta, &token).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");
    assert_eq!(refused["error"]["code"], "invalid_join_token");

    // One use: it joins once; another cluster with the same token is
    // refused (a peer joining again under its own key spends nothing:
    // `tests/platform/federation_cli.rs`).
    let token = beta.join_token().await;
    let (status, joined) = join(&alpha, &beta, &token).await;
    assert_eq!(status, StatusCode::CREATED, "{joined}");
    let gamma = Member::bare("gamma").await;
    let (status, refused) = join(&gamma, &beta, &token).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");

    // Wrong guesses: the free ones (the join above reset the count, the
    // spent token was one) and the one that starts the wait answer 401,
    // then the address waits, the right token too: 429 `join_rate_limited`.
    let (status, refused) = join(&gamma, &beta, "syj_wrong").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");
    let (status, refused) = join(&gamma, &beta, "syj_wrong").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");
    let (status, refused) = join(&gamma, &beta, "syj_wrong").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");
    let (status, refused) = join(&gamma, &beta, "syj_wrong").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{refused}");
    assert_eq!(refused["error"]["code"], "join_rate_limited", "{refused}");
    let token = beta.join_token().await;
    let (status, refused) = join(&gamma, &beta, &token).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{refused}");
    // The wait passes; the right token joins.
    eventually("the join never got past the backoff", || async {
        let (status, _) = join(&gamma, &beta, &token).await;
        (status != StatusCode::TOO_MANY_REQUESTS).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_where_no_cluster_answers_says_one_thing_whatever_answered() {
    let alpha = Member::bare("alpha").await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let targets = [
        // Nothing listens.
        closed_url,
        // An HTTP server that is no link (alpha's own API, another path).
        format!("{}/api/nothing", alpha.url()),
    ];
    let mut answers = Vec::new();
    for url in targets {
        let (status, refused) = alpha
            .call(
                Method::POST,
                "/api/federation/peers",
                Some(json!({"url": url, "join_token": "syj_x", "label": "probe"})),
            )
            .await;
        answers.push((status, refused));
    }
    assert_eq!(
        answers[0].0,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        answers[0].1
    );
    assert_eq!(answers[0].1["error"]["code"], "NODE_UNAVAILABLE");
    assert_eq!(answers[0], answers[1], "the answers tell the targets apart");
}
