//! The console's plugin upload over HTTP, below the browser: the multipart
//! form is refused unless its first field is the session's CSRF token
//! (checked before any byte of the file is kept), and a signature file
//! chosen beside the component reaches the registry as the CLI's
//! `x-switchyard-signature` header does, so the registry's refusals and
//! its record of the signer are the API's own.

use reqwest::redirect::Policy;
use reqwest::{StatusCode, header};
use serde_json::Value;
use switchyard_protocol::plugin::PluginKind;
use switchyard_signing::SigningKey;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins::{component, sha256};
use switchyard_tests::replica::Replica;

const BOUNDARY: &str = "----switchyard-console-test";

/// A `multipart/form-data` body of `parts` in order: `(name, file name if
/// a file, bytes)`.
fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, file, bytes) in parts {
        body.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        match file {
            Some(file) => body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{file}\"\r\n\
                     Content-Type: application/octet-stream\r\n\r\n"
                )
                .as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

/// A browser's session: its cookie and the CSRF token its pages carry.
struct Browser {
    http: reqwest::Client,
    url: String,
    cookie: String,
    csrf: String,
}

impl Browser {
    async fn sign_in(url: &str) -> Self {
        let http = reqwest::Client::builder()
            .redirect(Policy::none())
            .build()
            .unwrap();
        let answer = http
            .post(format!("{url}/console/sign-in"))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(format!("token={ADMIN_TOKEN}&next=%2Fconsole%2Fplugins"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::SEE_OTHER, "signing in");
        let cookie = answer
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with("switchyard_console="))
            .and_then(|v| v.split(';').next())
            .expect("the session cookie")
            .to_string();
        let page = http
            .get(format!("{url}/console/plugins"))
            .header(header::COOKIE, &cookie)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let csrf = page
            .split(r#"name="csrf-token" content=""#)
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("the page's CSRF token")
            .to_string();
        Self {
            http,
            url: url.to_string(),
            cookie,
            csrf,
        }
    }

    /// Posts the upload form: the status and the page (or the redirect).
    async fn upload(&self, parts: &[(&str, Option<&str>, &[u8])]) -> (StatusCode, String) {
        let answer = self
            .http
            .post(format!("{}/console/plugins", self.url))
            .header(header::COOKIE, &self.cookie)
            .header(
                header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(multipart(parts))
            .send()
            .await
            .unwrap();
        let status = answer.status();
        let location = answer
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = answer.text().await.unwrap();
        (status, location.unwrap_or(text))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_upload_checks_its_token_first_and_carries_a_signature() {
    let database_url = fresh_database().await;
    let data = tempfile::tempdir().unwrap();
    let replica = Replica::with(&database_url, data.path(), |_| {}).await;
    let browser = Browser::sign_in(&replica.url).await;
    let wasm = component("max-tokens");
    let digest = sha256(&wasm);

    // The token after the file, a wrong token, no token: refused, nothing stored.
    let csrf = browser.csrf.clone();
    let late = [
        ("name", None, b"late-token".as_slice()),
        ("version", None, b"1.0.0".as_slice()),
        ("file", Some("max-tokens.wasm"), wasm.as_slice()),
        ("csrf", None, csrf.as_bytes()),
    ];
    let wrong = [
        ("csrf", None, b"0123".as_slice()),
        ("name", None, b"late-token".as_slice()),
        ("version", None, b"1.0.0".as_slice()),
        ("file", Some("max-tokens.wasm"), wasm.as_slice()),
    ];
    for parts in [&late[..], &wrong[..], &late[..3]] {
        let (status, page) = browser.upload(parts).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
        assert!(page.contains("csrf_mismatch"), "{page}");
    }
    let (status, _) = replica
        .call(replica.admin(reqwest::Method::GET, "/api/plugins/late-token"))
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a refused form stored nothing"
    );

    // Signed by a key the cluster does not trust: kept, marked untrusted.
    let key = SigningKey::generate();
    let signature = switchyard_signing::sign(&key, PluginKind::Policy, "signed", "1.0.0", &digest);
    let signature = serde_json::to_vec(&signature).unwrap();
    let form = |version: &'static str| {
        [
            ("csrf", None, csrf.as_bytes()),
            ("name", None, b"signed".as_slice()),
            ("version", None, version.as_bytes()),
            ("file", Some("max-tokens.wasm"), wasm.as_slice()),
            ("signature", Some("signed.sig"), signature.as_slice()),
        ]
    };
    let (status, location) = browser.upload(&form("1.0.0")).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{location}");
    assert_eq!(location, "/console/plugins?uploaded=signed&version=1.0.0");
    let (status, record) = replica
        .call(replica.admin(reqwest::Method::GET, "/api/plugins/signed"))
        .await;
    assert_eq!(status, StatusCode::OK, "{record}");
    let version = &record["versions"][0];
    assert_eq!(version["sha256"], Value::String(digest.clone()));
    assert_eq!(version["signature"]["key_id"], Value::String(key.key_id()));
    assert_eq!(version["signature"]["trust"], "untrusted");

    // The same signature for another version: the API's refusal, shown
    // with its status and code on the page, the name kept in the form.
    let (status, page) = browser.upload(&form("2.0.0")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{page}");
    assert!(page.contains("untrusted_signature"), "{page}");
    assert!(page.contains(r#"value="signed""#), "{page}");

    // A file that is not a signature file: refused before the API.
    let junk = [
        ("csrf", None, csrf.as_bytes()),
        ("name", None, b"signed".as_slice()),
        ("version", None, b"3.0.0".as_slice()),
        ("file", Some("max-tokens.wasm"), wasm.as_slice()),
        ("signature", Some("signed.sig"), b"not json".as_slice()),
    ];
    let (status, page) = browser.upload(&junk).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("invalid_signature"), "{page}");
}
