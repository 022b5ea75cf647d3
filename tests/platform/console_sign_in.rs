//! The console's sign-in form: its body deadline answers the console's
//! page, `next` stays inside the console, attempts are rate-limited per
//! address and per key, and a key's sessions are capped.

use std::time::Duration;

use reqwest::header;
use reqwest::redirect::Policy;
use reqwest::{Method, StatusCode};
use serde_json::json;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::replica::Replica;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap()
}

/// Posts the sign-in form: the status, the `Location` or the page, and
/// the session cookie if one was set.
async fn sign_in(url: &str, token: &str, next: &str) -> (StatusCode, String, Option<String>) {
    let form = form_body(&[("token", token), ("next", next)]);
    let answer = browser()
        .post(format!("{url}/console/sign-in"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap();
    let status = answer.status();
    let cookie = answer
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("switchyard_console="))
        .and_then(|v| v.split(';').next())
        .map(str::to_string);
    let location = answer
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let retry_after = answer.headers().get(header::RETRY_AFTER).cloned();
    let text = answer.text().await.unwrap();
    if status == StatusCode::TOO_MANY_REQUESTS {
        assert!(retry_after.is_some(), "a 429 without Retry-After");
    }
    (status, location.unwrap_or(text), cookie)
}

/// `pairs` as an urlencoded form.
fn form_body(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            let v: String = v
                .bytes()
                .map(|b| match b {
                    b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect();
            format!("{k}={v}")
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Whether a session cookie still opens the overview.
async fn live(url: &str, cookie: &str) -> bool {
    let answer = browser()
        .get(format!("{url}/console/"))
        .header(header::COOKIE, cookie)
        .send()
        .await
        .unwrap();
    answer.status() == StatusCode::OK
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_body_that_times_out_is_the_consoles_page() {
    let database_url = fresh_database().await;
    let data_dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&database_url, data_dir.path(), |config| {
        config.edge.body_idle = Duration::from_millis(500);
    })
    .await;
    let address = replica.url.trim_start_matches("http://").to_string();
    let mut socket = TcpStream::connect(&address).await.unwrap();
    socket
        .write_all(
            b"POST /console/sign-in HTTP/1.1\r\nhost: x\r\n\
              content-type: application/x-www-form-urlencoded\r\ncontent-length: 100\r\n\r\ntok",
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), socket.read_to_end(&mut answer))
        .await
        .expect("the replica kept the connection open")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 408"), "{answer}");
    assert!(answer.contains("content-type: text/html"), "{answer}");
    assert!(answer.contains("<code>body_timeout</code>"), "{answer}");
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_never_leads_out_of_the_console() {
    let database_url = fresh_database().await;
    let data_dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&database_url, data_dir.path(), |_| {}).await;
    for (next, to) in [
        ("/console/keys", "/console/keys"),
        ("/console/a/../nodes", "/console/nodes"),
        ("/console/../../x", "/console/"),
        ("/console/%2e%2e/api/keys", "/console/"),
    ] {
        let (status, location, _) = sign_in(&replica.url, ADMIN_TOKEN, next).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{next}");
        assert_eq!(location, to, "{next}");
    }
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_ins_are_limited_and_a_keys_sessions_capped() {
    use switchyard_console::session::MAX_SESSIONS_PER_KEY;
    use switchyard_console::sign_in_limit::{FREE_FAILURES_PER_ADDRESS, FREE_SIGN_INS_PER_KEY};
    let database_url = fresh_database().await;
    let data_dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&database_url, data_dir.path(), |_| {}).await;
    let url = replica.url.clone();

    // One session more than the cap: the oldest is closed, the others live.
    let mut cookies = Vec::new();
    for _ in 0..=MAX_SESSIONS_PER_KEY {
        let (status, _, cookie) = sign_in(&url, ADMIN_TOKEN, "").await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        cookies.push(cookie.expect("a session cookie"));
    }
    assert!(!live(&url, &cookies[0]).await, "the oldest session is open");
    assert!(live(&url, &cookies[1]).await);
    assert!(live(&url, cookies.last().unwrap()).await);

    // The key's allowance of sign-ins, then 429.
    for _ in cookies.len()..FREE_SIGN_INS_PER_KEY as usize {
        let (status, page, _) = sign_in(&url, ADMIN_TOKEN, "").await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{page}");
    }
    let (status, page, cookie) = sign_in(&url, ADMIN_TOKEN, "").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{page}");
    assert!(page.contains("too_many_sign_in_attempts"), "{page}");
    assert!(cookie.is_none());

    // Another key still signs in from this address...
    let (status, body) = replica
        .call(
            replica
                .admin(Method::POST, "/api/keys")
                .json(&json!({"name": "ops", "scopes": ["inference"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let other = body["token"].as_str().unwrap().to_string();
    let (status, _, _) = sign_in(&url, &other, "").await;
    assert_eq!(status, StatusCode::SEE_OTHER);

    // ... until the address fails too often: then even a right key waits.
    for _ in 0..FREE_FAILURES_PER_ADDRESS {
        let (status, page, _) = sign_in(&url, "sy_wrong", "").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{page}");
    }
    for token in ["sy_wrong", other.as_str()] {
        let (status, page, _) = sign_in(&url, token, "").await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{page}");
        assert!(page.contains("too_many_sign_in_attempts"), "{page}");
    }
    replica.stop().await;
}
