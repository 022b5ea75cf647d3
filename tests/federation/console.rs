//! The console's federation pages between two real clusters, driven over
//! HTTP as a browser would: a signed-in session (its cookie kept by hand),
//! every form with the CSRF token read from the page, and each form's
//! answer read on the page it redirects to. Offer, join with a minted
//! token, request, review and approve exact resources, complete the
//! pairing, read the receipt, browse what the peer shares, revoke, retire
//! and forget: each step through the pages, each checked in the API. Then
//! a managed service changed with the operation id its page showed first,
//! and a granted revision's manifest and verified copy, drawn to its end
//! by the fragment its row on the copies page refreshes.

use std::collections::BTreeMap;

use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::json;
use sha2::{Digest, Sha256};
use switchyard_protocol::federation::GrantRecord;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::federation::{Member, eventually, grant};

/// The size of the revision only the owner holds, copied through the
/// pages: one file, enough to take more than an instant.
const SHARED_BYTES: usize = 3 << 20;

/// A browser's session with one cluster's console: its cookies and the
/// session's CSRF token.
struct Browser {
    http: reqwest::Client,
    base: String,
    cookies: BTreeMap<String, String>,
    csrf: String,
}

impl Browser {
    /// Signs in with the admin token.
    async fn sign_in(base: &str) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let mut browser = Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            cookies: BTreeMap::new(),
            csrf: String::new(),
        };
        let response = browser
            .http
            .post(format!("{}/console/sign-in", browser.base))
            .form(&[("token", ADMIN_TOKEN), ("next", "/console/federation")])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "signing in");
        browser.keep(&response);
        let (status, page) = browser.get("/console/federation").await;
        assert_eq!(status, StatusCode::OK, "{page}");
        browser.csrf = meta_csrf(&page).expect("every signed-in page names its CSRF token");
        browser
    }

    /// Keeps the cookies a response sets (and forgets those it clears).
    fn keep(&mut self, response: &reqwest::Response) {
        for set in response.headers().get_all(SET_COOKIE) {
            let set = set.to_str().unwrap();
            let pair = set.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() || set.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_string(), value.to_string());
            }
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// A page: its status and HTML.
    async fn get(&mut self, path: &str) -> (StatusCode, String) {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .header(COOKIE, self.cookie_header())
            .send()
            .await
            .unwrap();
        self.keep(&response);
        (response.status(), response.text().await.unwrap())
    }

    /// Posts a form with the session's CSRF token: the page it redirects
    /// to (where its message shows), or the page it answered itself.
    async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> String {
        let mut form: Vec<(&str, &str)> = vec![("csrf", &self.csrf)];
        form.extend_from_slice(fields);
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .header(COOKIE, self.cookie_header())
            .form(&form)
            .send()
            .await
            .unwrap();
        self.keep(&response);
        if response.status() == StatusCode::SEE_OTHER {
            let to = response.headers()[LOCATION].to_str().unwrap().to_string();
            return self.get(&to).await.1;
        }
        response.text().await.unwrap()
    }
}

/// The `<meta name="csrf-token">` of a page.
fn meta_csrf(page: &str) -> Option<String> {
    let at = page.find(r#"name="csrf-token" content=""#)?;
    let rest = &page[at + r#"name="csrf-token" content=""#.len()..];
    Some(rest[..rest.find('"')?].to_string())
}

/// The `value` of the element with `id` on a page.
fn value_of(page: &str, id: &str) -> Option<String> {
    let at = page.find(&format!(r#"id="{id}""#))?;
    let tag = &page[at..at + page[at..].find('>')?];
    let start = tag.find(r#"value=""#)? + r#"value=""#.len();
    let rest = &tag[start..];
    Some(rest[..rest.find('"')?].to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_through_the_console_pages_leaves_both_keys_on_the_receipt() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::serving("beta", json!({})));
    let (mut a, mut b) = tokio::join!(Browser::sign_in(alpha.url()), Browser::sign_in(beta.url()));

    // Beta shares its deployment as the service `chat`.
    let deployment = beta.deployment.clone().unwrap();
    let page = b
        .post(
            "/console/federation/offers",
            &[
                ("kind", "service"),
                ("deployment", &deployment),
                ("id", "chat"),
            ],
        )
        .await;
    assert!(page.contains("Offer chat published"), "{page}");

    // Beta mints a join token, shown once; alpha joins with it.
    let page = b.post("/console/federation/pair/token", &[]).await;
    let token = value_of(&page, "join-token-minted").expect("the minted token is shown");
    assert!(page.contains(&format!("--token {token}")), "{page}");
    let (_, again) = b.get("/console/federation/pair").await;
    assert!(!again.contains(&token), "the token is shown only once");
    let page = a
        .post(
            "/console/federation/pair/join",
            &[
                ("url", beta.url()),
                ("join_token", &token),
                ("label", "beta"),
            ],
        )
        .await;
    assert!(page.contains("Joined beta"), "{page}");
    alpha.until_link_up("beta").await;
    beta.until_link_up("alpha").await;
    let (_, overview) = a.get("/console/federation").await;
    assert!(
        overview.contains(r#"href="/console/federation/peers/beta""#),
        "{overview}"
    );

    // Alpha asks for inference; beta reviews it and approves exactly `chat`.
    let page = a
        .post(
            "/console/federation/peers/beta/request",
            &[("operation", "inference"), ("note", "console test")],
        )
        .await;
    assert!(page.contains("sent to beta"), "{page}");
    let requests = beta
        .expect(
            StatusCode::OK,
            Method::GET,
            "/api/federation/requests",
            None,
        )
        .await;
    let request = requests["requests"][0]["id"].as_str().unwrap().to_string();
    let (_, list) = b.get("/console/federation/requests").await;
    assert!(
        list.contains(&request) && list.contains("console test"),
        "{list}"
    );
    let (_, review) = b
        .get(&format!("/console/federation/requests/{request}"))
        .await;
    assert!(review.contains("Approve exact resources"), "{review}");
    assert!(
        review.contains(r#"value="chat""#),
        "the offered service is a choice: {review}"
    );
    let page = b
        .post(
            &format!("/console/federation/requests/{request}/approve"),
            &[
                ("operation", "inference"),
                ("service", "chat"),
                ("lifetime_days", "30"),
                ("max_concurrent", "4"),
                ("max_requests", "100"),
                ("max_model_gib", "0"),
            ],
        )
        .await;
    assert!(page.contains("offered to alpha"), "{page}");
    let grants = beta
        .expect(StatusCode::OK, Method::GET, "/api/federation/grants", None)
        .await;
    let grant = grants["grants"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(grants["grants"][0]["terms"]["services"], json!(["chat"]));
    assert_eq!(grants["grants"][0]["terms"]["max_concurrent"], 4);

    // Alpha completes the pairing from its grants page.
    let (_, list) = a.get("/console/federation/grants").await;
    assert!(list.contains("Complete pairing"), "{list}");
    let page = a
        .post(&format!("/console/federation/grants/{grant}/complete"), &[])
        .await;
    assert!(page.contains("completed"), "{page}");
    let record: GrantRecord = serde_json::from_value(
        beta.expect(
            StatusCode::OK,
            Method::GET,
            &format!("/api/federation/grants/{grant}"),
            None,
        )
        .await,
    )
    .unwrap();
    let grantee_signature = record.grantee_signature.clone().expect("completed");
    for browser in [&mut a, &mut b] {
        let (_, receipt) = browser
            .get(&format!("/console/federation/grants/{grant}"))
            .await;
        assert!(receipt.contains(&record.owner_signature), "{receipt}");
        assert!(receipt.contains(&grantee_signature), "{receipt}");
    }

    // Alpha browses what beta shares: the service as /v1 names it.
    let (_, peer) = a.get("/console/federation/peers/beta").await;
    assert!(peer.contains("beta/chat"), "{peer}");

    // Beta revokes; alpha sees it revoked, retires it, and forgets beta.
    let page = b
        .post(&format!("/console/federation/grants/{grant}/revoke"), &[])
        .await;
    assert!(page.contains("revoked"), "{page}");
    eventually("alpha to learn of the revocation", || async {
        let (_, record) = alpha
            .call(
                Method::GET,
                &format!("/api/federation/grants/{grant}"),
                None,
            )
            .await;
        (record["status"] == "revoked").then_some(())
    })
    .await;
    let page = a
        .post(&format!("/console/federation/grants/{grant}/retire"), &[])
        .await;
    assert!(page.contains("retired"), "{page}");
    let page = a.post("/console/federation/peers/beta/forget", &[]).await;
    assert!(page.contains("Peer beta forgotten"), "{page}");
    let (status, _) = alpha
        .call(Method::GET, "/api/federation/peers/beta", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The text of the element with `id` (no markup inside it).
fn text_of(page: &str, id: &str) -> Option<String> {
    let at = page.find(&format!(r#"id="{id}""#))?;
    let start = at + page[at..].find('>')? + 1;
    let rest = &page[start..];
    Some(rest[..rest.find('<')?].to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_service_and_a_verified_copy_through_the_console_pages() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::serving("beta", json!({})));
    alpha.join(&beta).await;
    let node = beta.cluster.node_id("w").await;
    // A revision only beta holds (both clusters start with `demo@r1`).
    let bytes: Vec<u8> = (0..SHARED_BYTES).map(|i| (i % 251) as u8).collect();
    let digest = hex::encode(Sha256::digest(&bytes));
    let uploaded = reqwest::Client::new()
        .put(format!("{}/api/library/blobs/{digest}", beta.url()))
        .bearer_auth(ADMIN_TOKEN)
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(uploaded.status(), StatusCode::CREATED);
    beta.expect(
        StatusCode::CREATED,
        Method::POST,
        "/api/models",
        Some(
            json!({"id": "shared", "revision": "r1", "licence": "apache-2.0",
                    "files": [{"path": "shared.gguf", "size": SHARED_BYTES, "sha256": digest}]}),
        ),
    )
    .await;
    for offer in [
        json!({"resource": {"kind": "model", "model": "demo", "revision": "r1"}}),
        json!({"resource": {"kind": "model", "model": "shared", "revision": "r1"}}),
        json!({"resource": {"kind": "machine", "node": node}}),
        json!({"id": "ref", "resource": {"kind": "runtime", "engine": "reference", "gpus_per_replica": 0}}),
    ] {
        beta.expect(
            StatusCode::CREATED,
            Method::POST,
            "/api/federation/offers",
            Some(offer),
        )
        .await;
    }
    let operations = ["inference", "inference:manage", "models:transfer"];
    let spec = json!({"models": ["demo@r1", "shared@r1"], "machines": [node], "lifetime_s": 3600,
                      "operations": operations, "max_concurrent": 4, "max_requests": 100,
                      "max_model_bytes": 4u64 << 30});
    let grant = grant(&beta, &alpha, &operations, spec).await;
    let mut a = Browser::sign_in(alpha.url()).await;

    // The peer's page names the operation id of the next change before it
    // is sent; the change's message repeats it.
    let (_, page) = a.get("/console/federation/peers/beta").await;
    assert!(page.contains("Managed services"), "{page}");
    let operation = text_of(&page, "next-operation").expect("the next operation id is shown");
    let page = a
        .post(
            "/console/federation/peers/beta/services",
            &[
                ("grant", &grant),
                ("operation_id", &operation),
                ("action", "create"),
                ("service", "mine"),
                ("model", "demo@r1"),
                ("runtime", "ref"),
                ("machine", &node),
                ("replicas", "1"),
            ],
        )
        .await;
    assert!(
        page.contains(&format!(
            "Operation {operation}: create mine done; it is stopped at revision 1"
        )),
        "{page}"
    );
    // Its receipt, inspected on the owner by that id.
    let (_, inspected) = a
        .get(&format!(
            "/console/federation/peers/beta?operation={operation}"
        ))
        .await;
    assert!(inspected.contains("Recorded outcome"), "{inspected}");
    // A change naming a revision the owner has moved past: refused with the
    // API's code, and the message keeps the operation id.
    let (_, page) = a.get("/console/federation/peers/beta").await;
    let stale = text_of(&page, "next-operation").unwrap();
    assert_ne!(stale, operation, "every page draws a fresh id");
    let page = a
        .post(
            "/console/federation/peers/beta/services",
            &[
                ("grant", &grant),
                ("operation_id", &stale),
                ("action", "stop"),
                ("service", "mine"),
                ("revision", "99"),
            ],
        )
        .await;
    assert!(
        page.contains("revision_changed") && page.contains(&stale),
        "{page}"
    );
    let (_, page) = a.get("/console/federation/peers/beta").await;
    let remove = text_of(&page, "next-operation").unwrap();
    let page = a
        .post(
            "/console/federation/peers/beta/services",
            &[
                ("grant", &grant),
                ("operation_id", &remove),
                ("action", "remove"),
                ("service", "mine"),
                ("revision", "1"),
            ],
        )
        .await;
    assert!(
        page.contains(&format!("Operation {remove}: remove mine done")),
        "{page}"
    );

    // The granted revision's manifest, then a verified copy drawn to its end.
    let (_, page) = a
        .get("/console/federation/peers/beta/models/shared/r1")
        .await;
    assert!(
        page.contains(&digest),
        "the manifest page lists the digest: {page}"
    );
    let page = a
        .post(
            "/console/federation/copies",
            &[("peer", "beta"), ("model", "shared"), ("revision", "r1")],
        )
        .await;
    assert!(page.contains("of shared@r1 from beta"), "{page}");
    let copies = alpha
        .expect(StatusCode::OK, Method::GET, "/api/federation/copies", None)
        .await;
    let copy = copies["copies"][0]["id"].as_str().unwrap().to_string();
    let (_, list) = a.get("/console/federation/copies").await;
    assert!(list.contains("shared@r1"), "{list}");
    let fragment = eventually("the copy to complete on its live fragment", || {
        let http = a.http.clone();
        let url = format!("{}/console/federation/copies/{copy}/live", a.base);
        let cookie = a.cookie_header();
        async move {
            let fragment = http
                .get(url)
                .header(COOKIE, cookie)
                .send()
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            fragment.contains("data-final").then_some(fragment)
        }
    })
    .await;
    assert!(
        fragment.contains(r#"class="state ok">complete"#),
        "{fragment}"
    );
    alpha
        .expect(StatusCode::OK, Method::GET, "/api/models/shared/r1", None)
        .await;
}
