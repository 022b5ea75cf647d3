//! Verified model copies: alpha copies a revision beta offers and grants
//! (`models:transfer`) into its own library, in ranges over the link's
//! bulk lane, through a TCP proxy the test can cut and pace. The copy
//! resumes from its durable offset after each reconnect (waits of 1 and
//! 2 s), is `interrupted` once the link stays down past its allowance,
//! goes on when resumed, and only a file with its declared SHA-256 enters
//! alpha's library. A pause keeps it, the `transfer` chain and a
//! revocation stop it, and the CLI draws one to its end.

use std::time::Duration;

use rand::RngCore;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::federation::{Member, grant};
use switchyard_tests::plugins::component;
use switchyard_tests::proxy::TcpProxy;

const MIB: u64 = 1 << 20;

/// `size` random bytes, uploaded to `member`'s library and registered as
/// `model@r1`; answers the digest.
async fn import(member: &Member, model: &str, size: u64) -> (String, Vec<u8>) {
    let mut bytes = vec![0u8; size as usize];
    rand::rng().fill_bytes(&mut bytes);
    let digest = hex::encode(Sha256::digest(&bytes));
    let uploaded = reqwest::Client::new()
        .put(format!("{}/api/library/blobs/{digest}", member.url()))
        .bearer_auth(ADMIN_TOKEN)
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(uploaded.status(), StatusCode::CREATED);
    member
        .expect(
            StatusCode::CREATED,
            Method::POST,
            "/api/models",
            Some(
                json!({"id": model, "revision": "r1", "licence": "apache-2.0",
                "files": [{"path": format!("{model}.gguf"), "size": size, "sha256": digest}]}),
            ),
        )
        .await;
    member
        .expect(
            StatusCode::CREATED,
            Method::POST,
            "/api/federation/offers",
            Some(json!({"resource": {"kind": "model", "model": model, "revision": "r1"}})),
        )
        .await;
    (digest, bytes)
}

/// Alpha and beta joined through a proxy pacing each direction at `rate`
/// bytes a second, beta offering `models` (name and size, revision `r1`)
/// and granting alpha copies of them; the models' digests, in order.
async fn paired(
    rate: u64,
    models: &[(&str, u64)],
) -> (Member, Member, TcpProxy, String, Vec<String>) {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::bare("beta"));
    let target = beta.url().trim_start_matches("http://").parse().unwrap();
    let proxy = TcpProxy::start_limited(target, Some(rate)).await;
    alpha.join_at(&beta, &proxy.url()).await;
    let mut digests = Vec::new();
    for (model, size) in models {
        digests.push(import(&beta, model, *size).await.0);
    }
    let models: Vec<String> = models.iter().map(|(m, _)| format!("{m}@r1")).collect();
    let spec = json!({"models": models, "operations": ["models:transfer"], "lifetime_s": 3600,
                      "max_concurrent": 4, "max_requests": 100, "max_model_bytes": 4u64 << 30});
    let grant = grant(&beta, &alpha, &["models:transfer"], spec).await;
    (alpha, beta, proxy, grant, digests)
}

async fn copy_of(member: &Member, id: &str) -> Value {
    member
        .expect(
            StatusCode::OK,
            Method::GET,
            &format!("/api/federation/copies/{id}"),
            None,
        )
        .await
}

/// Polls copy `id` until `done` holds; the record. A copy that never
/// gets there is shown as last seen.
async fn until_copy(member: &Member, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = std::time::Instant::now();
    loop {
        let copy = copy_of(member, id).await;
        if done(&copy) {
            return copy;
        }
        assert!(
            started.elapsed() < switchyard_tests::cluster::PATIENCE,
            "{what}: {copy}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn held(copy: &Value) -> u64 {
    copy["bytes_held"].as_u64().unwrap()
}

fn reconnects(copy: &Value) -> usize {
    copy["reconnects"].as_array().unwrap().len()
}

/// The blob's bytes in `member`'s library, if it holds it.
fn library_blob(member: &Member, digest: &str) -> Option<Vec<u8>> {
    std::fs::read(
        member
            .cluster
            .data
            .path()
            .join("library/blobs/sha256")
            .join(digest),
    )
    .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_resumes_over_cut_links_is_interrupted_past_its_allowance_and_lands_verified() {
    // 200 MiB at 64 MiB/s a direction: about three seconds of bytes.
    let (alpha, beta, proxy, grant_id, digests) = paired(64 * MIB, &[("big", 200 * MIB)]).await;
    let digest = &digests[0];

    let manifest = alpha
        .expect(
            StatusCode::OK,
            Method::GET,
            "/api/federation/peers/beta/models/big/r1",
            None,
        )
        .await;
    assert_eq!(manifest["licence"], "apache-2.0");
    assert_eq!(
        manifest["files"],
        json!([{"path": "big.gguf", "size": 200 * MIB, "sha256": digest}])
    );
    assert!(!manifest.to_string().contains("http"), "no URL: {manifest}");

    let response = reqwest::Client::new()
        .post(format!("{}/api/federation/copies", alpha.url()))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"peer": "beta", "model": "big", "revision": "r1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let location = response.headers()["location"].to_str().unwrap().to_string();
    let started: Value = response.json().await.unwrap();
    let id = started["id"].as_str().unwrap().to_string();
    assert_eq!(location, format!("/api/federation/copies/{id}"));
    assert_eq!(started["grant"], grant_id);
    assert_eq!(started["bytes_total"], 200 * MIB);

    // A second start of the same revision is the same copy.
    let again = alpha
        .expect(
            StatusCode::OK,
            Method::POST,
            "/api/federation/copies",
            Some(json!({"peer": "beta", "model": "big", "revision": "r1"})),
        )
        .await;
    assert_eq!(again["id"], id.as_str());

    // Cut once the first range is durable, and again past the second.
    until_copy(&alpha, &id, "the first range never became durable", |c| {
        held(c) >= 64 * MIB
    })
    .await;
    proxy.cut();
    let first_held = until_copy(&alpha, &id, "the copy never waited to reconnect", |c| {
        c["state"] == "waiting" || reconnects(c) == 1
    })
    .await;
    let resumed = until_copy(
        &alpha,
        &id,
        "no range came after the first reconnect",
        |c| reconnects(c) == 1 && held(c) >= 128 * MIB,
    )
    .await;
    assert!(held(&resumed) >= held(&first_held), "{resumed}");
    // Cut inside the next range, not at its start: a range that has carried
    // nothing yet when its lane drops is retried while the link comes back,
    // without counting a reconnect.
    let boundary = proxy.forwarded();
    switchyard_tests::federation::eventually("the next range to carry bytes", || async {
        (proxy.forwarded() >= boundary + 4 * MIB).then_some(())
    })
    .await;
    proxy.cut();
    until_copy(&alpha, &id, "the copy never reconnected twice", |c| {
        reconnects(c) == 2
    })
    .await;

    // Down longer than the allowance: the third reconnect fails.
    proxy.refuse(true);
    proxy.cut();
    let interrupted = until_copy(&alpha, &id, "the copy was never interrupted", |c| {
        c["state"] == "interrupted"
    })
    .await;
    assert_eq!(interrupted["code"], "reconnects_exhausted", "{interrupted}");
    let waits: Vec<u64> = interrupted["reconnects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["waited_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(waits.len(), 3, "{interrupted}");
    assert!((900..1800).contains(&waits[0]), "{waits:?}");
    assert!((1900..3000).contains(&waits[1]), "{waits:?}");
    assert!((3900..5000).contains(&waits[2]), "{waits:?}");
    let kept = held(&interrupted);
    assert!(kept >= 128 * MIB, "the durable bytes stay: {interrupted}");
    let status = alpha
        .expect(StatusCode::OK, Method::GET, "/api/federation/status", None)
        .await;
    assert_eq!(status["copies"][0]["state"], "interrupted", "{status}");

    // Only an explicit resume goes on, with a fresh allowance.
    proxy.refuse(false);
    alpha.until_link_up("beta").await;
    let resumed = alpha
        .expect(
            StatusCode::OK,
            Method::POST,
            &format!("/api/federation/copies/{id}/resume"),
            None,
        )
        .await;
    assert_eq!(resumed["state"], "running", "{resumed}");
    assert_eq!(reconnects(&resumed), 0, "{resumed}");
    assert!(
        held(&resumed) >= kept,
        "resumed from the durable offset: {resumed}"
    );
    let complete = until_copy(&alpha, &id, "the copy never completed", |c| {
        c["state"] == "complete" || c["state"] == "stopped"
    })
    .await;
    assert_eq!(complete["state"], "complete", "{complete}");
    assert_eq!(held(&complete), 200 * MIB);

    // The blob verifies and the revision is alpha's now.
    let blob = library_blob(&alpha, digest).expect("the blob is in alpha's library");
    assert_eq!(&hex::encode(Sha256::digest(&blob)), digest);
    let model = alpha
        .expect(StatusCode::OK, Method::GET, "/api/models/big/r1", None)
        .await;
    assert_eq!(model["imported_by"], "federation:beta", "{model}");
    let status = alpha
        .expect(StatusCode::OK, Method::GET, "/api/federation/status", None)
        .await;
    assert_eq!(status["copies"], json!([]), "{status}");

    // Beta charged every byte it served, repeats included, but the
    // resumes did not start over.
    let charged = beta
        .expect(
            StatusCode::OK,
            Method::GET,
            &format!("/api/federation/grants/{grant_id}"),
            None,
        )
        .await["usage"]["model_bytes"]
        .as_u64()
        .unwrap();
    assert!(charged >= 200 * MIB, "{charged}");
    assert!(charged <= 200 * MIB + 3 * 64 * MIB, "{charged}");

    // Starting it again answers the revision as complete.
    let done = alpha
        .expect(
            StatusCode::OK,
            Method::POST,
            "/api/federation/copies",
            Some(json!({"peer": "beta", "model": "big", "revision": "r1"})),
        )
        .await;
    assert_eq!(done["state"], "complete", "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_source_never_enters_the_library_and_a_paused_copy_resumes() {
    // 48 MiB at 16 MiB/s: three seconds to pause in.
    let (alpha, beta, _proxy, _, digests) = paired(
        16 * MIB,
        &[("bad", 4 * MIB), ("slow", 48 * MIB), ("denied", MIB)],
    )
    .await;
    let [bad, slow, denied] = &digests[..] else {
        unreachable!()
    };

    // Flip one byte of beta's blob, same size.
    let path = beta
        .cluster
        .data
        .path()
        .join("library/blobs/sha256")
        .join(bad);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[1234] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let started = alpha
        .expect(
            StatusCode::ACCEPTED,
            Method::POST,
            "/api/federation/copies",
            Some(json!({"peer": "beta", "model": "bad", "revision": "r1"})),
        )
        .await;
    let id = started["id"].as_str().unwrap();
    let stopped = until_copy(&alpha, id, "the corrupted copy never stopped", |c| {
        !matches!(c["state"].as_str(), Some("running" | "waiting"))
    })
    .await;
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    assert_eq!(stopped["code"], "digest_mismatch", "{stopped}");
    assert_eq!(
        held(&stopped),
        0,
        "the partial bytes were discarded: {stopped}"
    );
    assert!(library_blob(&alpha, bad).is_none());
    alpha
        .expect(
            StatusCode::NOT_FOUND,
            Method::GET,
            "/api/models/bad/r1",
            None,
        )
        .await;
    let partial = alpha.cluster.data.path().join("library/partial").join(id);
    assert!(
        std::fs::read_dir(&partial).map_or(true, |mut d| d.next().is_none()),
        "no partial bytes are left"
    );
    // Not running: it can be deleted.
    alpha
        .expect(
            StatusCode::NO_CONTENT,
            Method::DELETE,
            &format!("/api/federation/copies/{id}"),
            None,
        )
        .await;

    // Pause in the middle, resume, complete.
    let started = alpha
        .expect(
            StatusCode::ACCEPTED,
            Method::POST,
            "/api/federation/copies",
            Some(json!({"peer": "beta", "model": "slow", "revision": "r1"})),
        )
        .await;
    let id = started["id"].as_str().unwrap();
    // Running: not deleted.
    let refused = alpha
        .expect(
            StatusCode::CONFLICT,
            Method::DELETE,
            &format!("/api/federation/copies/{id}"),
            None,
        )
        .await;
    assert_eq!(refused["error"]["code"], "copy_running", "{refused}");
    // Paused while its one range is in flight (the durable offset moves
    // only when a range is whole).
    let paused = alpha
        .expect(
            StatusCode::OK,
            Method::POST,
            &format!("/api/federation/copies/{id}/pause"),
            None,
        )
        .await;
    assert_eq!(paused["state"], "paused", "{paused}");
    // Paused stays paused (nothing is expected to happen: a span of time
    // is what is checked).
    tokio::time::sleep(Duration::from_millis(700)).await;
    let still = copy_of(&alpha, id).await;
    assert_eq!(still["state"], "paused", "{still}");
    let resumed = alpha
        .expect(
            StatusCode::OK,
            Method::POST,
            &format!("/api/federation/copies/{id}/resume"),
            None,
        )
        .await;
    assert_eq!(resumed["state"], "running", "{resumed}");
    let complete = until_copy(&alpha, id, "the resumed copy never ended", |c| {
        !matches!(c["state"].as_str(), Some("running" | "waiting"))
    })
    .await;
    assert_eq!(complete["state"], "complete", "{complete}");
    let blob = library_blob(&alpha, slow).expect("in alpha's library");
    assert_eq!(&hex::encode(Sha256::digest(&blob)), slow);

    // Alpha's transfer chain allows copying no model at all: a deny stops
    // the copy with the policy's code before a byte moves.
    let bytes = component("model-allowlist");
    let pushed = reqwest::Client::new()
        .post(format!("{}/api/plugins", alpha.url()))
        .query(&[
            ("name", "model-allowlist"),
            ("version", "1.0.0"),
            ("sha256", &switchyard_tests::plugins::sha256(&bytes)),
        ])
        .bearer_auth(ADMIN_TOKEN)
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), StatusCode::CREATED);
    alpha
        .expect(
            StatusCode::OK,
            Method::PUT,
            "/api/admission/transfer",
            Some(
                json!({"policies": [{"plugin": "model-allowlist", "version": "1.0.0",
                "settings": {"rules": [], "default": ["nothing-*"]}, "mode": "enforce"}]}),
            ),
        )
        .await;
    // The replica that took the binding runs it at once.
    let refused = alpha
        .expect(
            StatusCode::FORBIDDEN,
            Method::POST,
            "/api/federation/copies",
            Some(json!({"peer": "beta", "model": "denied", "revision": "r1"})),
        )
        .await;
    assert_eq!(refused["error"]["code"], "model_not_allowed", "{refused}");
    let copies = alpha
        .expect(StatusCode::OK, Method::GET, "/api/federation/copies", None)
        .await;
    let copy = copies["copies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["model"] == "denied")
        .cloned()
        .expect("the refused copy is kept");
    assert_eq!(copy["state"], "stopped", "{copy}");
    assert_eq!(copy["code"], "model_not_allowed", "{copy}");
    assert!(library_blob(&alpha, denied).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_stops_a_running_copy() {
    // 72 MiB at 8 MiB/s: nine seconds, revoked in the first.
    let (alpha, beta, _proxy, grant_id, digests) = paired(8 * MIB, &[("held", 72 * MIB)]).await;
    let digest = &digests[0];
    let started = alpha
        .expect(
            StatusCode::ACCEPTED,
            Method::POST,
            "/api/federation/copies",
            Some(json!({"peer": "beta", "model": "held", "revision": "r1"})),
        )
        .await;
    let id = started["id"].as_str().unwrap();
    // A range is in flight once beta charged it.
    switchyard_tests::federation::eventually("no range was ever asked for", || async {
        let grant = beta
            .expect(
                StatusCode::OK,
                Method::GET,
                &format!("/api/federation/grants/{grant_id}"),
                None,
            )
            .await;
        (grant["usage"]["model_bytes"].as_u64() > Some(0)).then_some(())
    })
    .await;
    let revoked_at = std::time::Instant::now();
    beta.expect(
        StatusCode::OK,
        Method::POST,
        &format!("/api/federation/grants/{grant_id}/revoke"),
        None,
    )
    .await;
    let stopped = until_copy(&alpha, id, "the revoked copy never stopped", |c| {
        !matches!(c["state"].as_str(), Some("running" | "waiting"))
    })
    .await;
    let ended_in = revoked_at.elapsed();
    assert!(
        ended_in < Duration::from_secs(1),
        "the copy stopped {ended_in:?} after the revocation"
    );
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    assert_eq!(stopped["code"], "grant_revoked", "{stopped}");
    assert!(library_blob(&alpha, digest).is_none());
}

/// Exit code, stdout and stderr of `switchyard federation <args>` against
/// `member`.
fn cli(member: &Member, args: &[&str]) -> (i32, String, String) {
    let output = tokio::task::block_in_place(|| {
        std::process::Command::new(switchyard_tests::process::binary())
            .arg("federation")
            .args(args)
            .args(["--server", member.url()])
            .env("SWITCHYARD_TOKEN", ADMIN_TOKEN)
            .env_remove("SWITCHYARD_DATA_DIR")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    });
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_inspects_a_revision_and_draws_its_copy_to_the_end() {
    let (alpha, _beta, _proxy, _, digests) = paired(32 * MIB, &[("cli", 8 * MIB)]).await;
    let (code, out, err) = cli(&alpha, &["model", "beta", "cli", "r1"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&digests[0]), "{out}");
    assert!(out.contains("licence apache-2.0"), "{out}");

    let (code, out, err) = cli(&alpha, &["copy", "beta", "cli", "r1"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("complete"), "{err}");
    assert!(library_blob(&alpha, &digests[0]).is_some());

    let (code, out, err) = cli(&alpha, &["copy", "list"]);
    assert_eq!(code, 0, "{out}{err}");
    let row = out.lines().find(|l| l.contains("cli@r1")).expect(&out);
    assert!(row.contains("complete"), "{out}");

    // Again: the revision is in the library already.
    let (code, out, err) = cli(&alpha, &["copy", "beta", "cli", "r1", "--detach"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("complete"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_takes_its_copy_over_from_the_durable_offset() {
    // 160 MiB at 32 MiB/s: three ranges, five seconds.
    let (mut alpha, beta, _proxy, grant_id, digests) =
        paired(32 * MIB, &[("kept", 160 * MIB)]).await;
    let started = alpha
        .expect(
            StatusCode::ACCEPTED,
            Method::POST,
            "/api/federation/copies",
            Some(json!({"peer": "beta", "model": "kept", "revision": "r1"})),
        )
        .await;
    let id = started["id"].as_str().unwrap().to_string();
    let before = until_copy(&alpha, &id, "the first range never became durable", |c| {
        held(c) >= 64 * MIB
    })
    .await;

    // The controller stops mid-copy and starts again on the same state.
    assert!(alpha.cluster.serve.terminate(), "a clean stop");
    alpha.cluster.serve = switchyard_tests::process::ServeProcess::on_set(
        &alpha.cluster.database_url,
        alpha.cluster.data.path(),
        None,
        &["--federation-label", "alpha"],
    );
    let after = copy_of(&alpha, &id).await;
    assert!(held(&after) >= held(&before), "{after}");
    let complete = until_copy(&alpha, &id, "the copy was never taken over", |c| {
        !matches!(c["state"].as_str(), Some("running" | "waiting"))
    })
    .await;
    assert_eq!(complete["state"], "complete", "{complete}");
    let blob = library_blob(&alpha, &digests[0]).expect("in alpha's library");
    assert_eq!(&hex::encode(Sha256::digest(&blob)), &digests[0]);
    // At most the range in flight at the stop was asked again.
    let charged = beta
        .expect(
            StatusCode::OK,
            Method::GET,
            &format!("/api/federation/grants/{grant_id}"),
            None,
        )
        .await["usage"]["model_bytes"]
        .as_u64()
        .unwrap();
    assert!(charged <= 160 * MIB + 64 * MIB, "{charged}");
}
