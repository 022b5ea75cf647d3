//! Signed plugins end to end: keys made and trusted with the real CLI,
//! components signed with it and uploaded signed, unsigned, by an untrusted
//! key and with tampered signatures, under `require_signed` and without it;
//! then a trusted key removed under a running chain.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_protocol::signing::{PluginSignature, SIGNATURE_HEADER};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::federation::eventually;
use switchyard_tests::plugins::{self, component, sha256};
use switchyard_tests::process::binary;
use switchyard_tests::replica::Replica;

use crate::requests::inference;

/// Exit code, stdout and stderr of `switchyard <args>` (with the server and
/// the admin token in the environment, as an operator's shell has them).
fn switchyard(url: &str, args: &[&str]) -> (i32, String, String) {
    let output = tokio::task::block_in_place(|| {
        Command::new(binary())
            .args(args)
            .env("SWITCHYARD_SERVER", url)
            .env("SWITCHYARD_TOKEN", ADMIN_TOKEN)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    });
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// Runs a command that must succeed; its stdout.
fn ok(url: &str, args: &[&str]) -> String {
    let (code, stdout, stderr) = switchyard(url, args);
    assert_eq!(code, 0, "{args:?}\n{stdout}\n{stderr}");
    stdout
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Makes a key pair with `trust keygen`; checks the private file is the
/// owner's alone and its secret was not printed.
fn keygen(url: &str, dir: &Path, name: &str) -> std::path::PathBuf {
    let key = dir.join(format!("{name}.key"));
    let out = ok(url, &["trust", "keygen", "--out", path(&key)]);
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let private = std::fs::read_to_string(&key).unwrap();
    let seed = private.split_whitespace().nth(1).unwrap();
    assert!(!out.contains(seed), "keygen printed the private key: {out}");
    key
}

/// Signs the shipped component `plugin` as `plugin@version` with `key`.
fn sign(url: &str, dir: &Path, key: &Path, plugin: &str, version: &str) -> std::path::PathBuf {
    let wasm = plugins::dir().join(format!("{plugin}.wasm"));
    let out = dir.join(format!("{plugin}-{version}.sig"));
    ok(
        url,
        &[
            "plugin",
            "sign",
            path(&wasm),
            "--key",
            path(key),
            "--name",
            plugin,
            "--version",
            version,
            "--out",
            path(&out),
        ],
    );
    out
}

/// Uploads `bytes` as `name@version` with a raw signature header.
async fn push_signed(
    replica: &Replica,
    name: &str,
    version: &str,
    bytes: &[u8],
    header: &str,
) -> (StatusCode, Value) {
    replica
        .call(
            replica
                .admin(Method::POST, "/api/plugins")
                .query(&[
                    ("name", name),
                    ("version", version),
                    ("sha256", &sha256(bytes)),
                ])
                .header(SIGNATURE_HEADER, header)
                .body(bytes.to_vec()),
        )
        .await
}

async fn require_policies(replica: &Replica, on: bool) {
    let (status, body) = replica
        .call(
            replica
                .admin(Method::PUT, "/api/cluster/settings")
                .json(&json!({"require_signed": {"policy": on}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["require_signed"]["policy"], on, "{body}");
}

fn read_signature(file: &Path) -> PluginSignature {
    serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap()
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_unsigned_and_untrusted_uploads_under_require_signed_and_without() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let url = replica.url.clone();
    let keys = tempfile::tempdir().unwrap();
    let release = keygen(&url, keys.path(), "release");
    let rogue = keygen(&url, keys.path(), "rogue");

    let added = ok(
        &url,
        &[
            "trust",
            "add",
            &format!("{}.pub", path(&release)),
            "--name",
            "release",
        ],
    );
    assert!(added.contains("release"), "{added}");
    // A private key given where the public one belongs is refused, unquoted.
    let (code_, _, stderr) = switchyard(&url, &["trust", "add", path(&rogue)]);
    assert_ne!(code_, 0);
    assert!(stderr.contains("private signing key"), "{stderr}");
    let listed: Value = serde_json::from_str(&ok(&url, &["trust", "list", "--json"])).unwrap();
    assert_eq!(listed["keys"].as_array().unwrap().len(), 1, "{listed}");
    // A malformed key is a stable 400.
    let (status, body) = replica
        .call(
            replica
                .admin(Method::POST, "/api/trust/keys")
                .json(&json!({"public_key": "not-a-key"})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_public_key")
    );

    require_policies(&replica, true).await;
    let bytes = component("max-tokens");

    // Unsigned: refused for its kind.
    let (status, body) = replica.push("max-tokens", "1.0.0", &bytes).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "signature_required"),
        "{body}"
    );

    // Signed by the trusted key, uploaded with the CLI: stored with its signer.
    let signed = sign(&url, keys.path(), &release, "max-tokens", "1.0.0");
    let wasm = plugins::dir().join("max-tokens.wasm");
    ok(
        &url,
        &[
            "plugin",
            "upload",
            path(&wasm),
            "--name",
            "max-tokens",
            "--version",
            "1.0.0",
            "--signature",
            path(&signed),
        ],
    );
    let (_, shown) = replica
        .call(replica.admin(Method::GET, "/api/plugins/max-tokens"))
        .await;
    let signer = &shown["versions"][0]["signature"];
    assert_eq!(signer["key_name"], "release", "{shown}");
    assert_eq!(
        (signer["trusted"].clone(), signer["trust"].clone()),
        (json!(true), json!("trusted"))
    );
    assert_eq!(signer["key_id"], read_signature(&signed).key_id);

    // Signed by a key the cluster does not trust: refused, with the CLI too.
    let rogue_signed = sign(&url, keys.path(), &rogue, "max-tokens", "1.0.1");
    let (exit, _, stderr) = switchyard(
        &url,
        &[
            "plugin",
            "upload",
            path(&wasm),
            "--name",
            "max-tokens",
            "--version",
            "1.0.1",
            "--signature",
            path(&rogue_signed),
        ],
    );
    assert_ne!(exit, 0);
    assert!(stderr.contains("untrusted_signature"), "{stderr}");

    // A trusted signature over another version, or with a flipped byte, or
    // naming another key's id: untrusted, whatever key made it.
    let good = read_signature(&signed);
    let header = |s: &PluginSignature| switchyard_signing::encode_header(s);
    let (status, body) = push_signed(&replica, "max-tokens", "1.0.2", &bytes, &header(&good)).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "untrusted_signature"),
        "{body}"
    );
    let mut flipped = good.clone();
    flipped.version = "1.0.2".into();
    let (status, body) =
        push_signed(&replica, "max-tokens", "1.0.2", &bytes, &header(&flipped)).await;
    assert_eq!(code(&body), "untrusted_signature", "{status} {body}");
    let mut forged = good.clone();
    let last = if forged.signature.ends_with('0') {
        "1"
    } else {
        "0"
    };
    forged.signature.replace_range(127.., last);
    let (_, body) = push_signed(&replica, "max-tokens", "1.0.0", &bytes, &header(&forged)).await;
    assert_eq!(code(&body), "untrusted_signature", "{body}");
    // Not a signature at all: 400.
    let (status, body) = push_signed(&replica, "max-tokens", "1.0.2", &bytes, "%%%").await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_signature")
    );

    // Without the requirement: unsigned is stored unsigned, an unknown key's
    // signature is kept as untrusted, a tampered one is still refused.
    require_policies(&replica, false).await;
    let (status, body) = replica.push("max-tokens", "1.0.3", &bytes).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["signature"], Value::Null);
    let rogue_signature = read_signature(&rogue_signed);
    let (status, body) = push_signed(
        &replica,
        "max-tokens",
        "1.0.1",
        &bytes,
        &header(&rogue_signature),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        (
            body["signature"]["trusted"].clone(),
            body["signature"]["trust"].clone()
        ),
        (json!(false), json!("untrusted")),
        "{body}"
    );
    let (_, body) = push_signed(&replica, "max-tokens", "1.0.0", &bytes, &header(&forged)).await;
    assert_eq!(code(&body), "untrusted_signature", "{body}");

    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_key_keeps_the_running_chain_and_status_says_no_longer_trusted() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let url = replica.url.clone();
    let keys = tempfile::tempdir().unwrap();
    let release = keygen(&url, keys.path(), "release");
    ok(
        &url,
        &[
            "trust",
            "add",
            &format!("{}.pub", path(&release)),
            "--name",
            "release",
        ],
    );
    let key_id = read_signature(&sign(&url, keys.path(), &release, "max-tokens", "1.0.0")).key_id;
    let bytes = component("max-tokens");
    // An unsigned policy, stored before the requirement was turned on.
    let (status, _) = replica
        .push("model-allowlist", "1.0.0", &component("model-allowlist"))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    require_policies(&replica, true).await;
    let signature = read_signature(&keys.path().join("max-tokens-1.0.0.sig"));
    let (status, body) = push_signed(
        &replica,
        "max-tokens",
        "1.0.0",
        &bytes,
        &switchyard_signing::encode_header(&signature),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let chain = json!([{"plugin": "max-tokens", "version": "1.0.0",
        "settings": {"max_tokens": 1000, "mode": "deny"}}]);
    // Two generations of the signed policy: the first one to roll back to.
    let first = json!([{"plugin": "max-tokens", "version": "1.0.0",
        "settings": {"max_tokens": 2000, "mode": "deny"}}]);
    let (status, body) = replica.set_chain("inference", first).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, generation) = replica.set_chain("inference", chain.clone()).await;
    assert_eq!(status, StatusCode::OK, "{generation}");
    // An unsigned policy is not bound while policies require signatures.
    let (status, body) = replica
        .set_chain(
            "inference",
            json!([{"plugin": "model-allowlist", "version": "1.0.0", "settings": {"allow": ["*"]}}]),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "signature_required"),
        "{body}"
    );
    let denies = || async {
        let (_, verdict) = replica
            .evaluate(
                "inference",
                &inference("research", "llama-3-8b", Some(5000)),
            )
            .await;
        (verdict["decision"] == "deny").then_some(())
    };
    eventually("the signed chain serves", denies).await;

    let removed = ok(&url, &["trust", "remove", &key_id]);
    assert!(removed.contains("no longer trusted"), "{removed}");

    // The chain runs on: same generation, still enforced.
    let (_, shown) = replica
        .call(replica.admin(Method::GET, "/api/admission/inference"))
        .await;
    assert_eq!(shown["generation"], generation["generation"], "{shown}");
    let signer = &shown["policies"][0]["signature"];
    assert_eq!(
        (
            signer["trusted"].clone(),
            signer["trust"].clone(),
            signer["key_name"].clone()
        ),
        (json!(false), json!("no_longer_trusted"), json!("release")),
        "{shown}"
    );
    let warning = shown["trust_warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.contains("no longer trusted") && warning.contains(&key_id),
        "{shown}"
    );
    assert!(denies().await.is_some(), "the running chain was unloaded");
    let (_, listed) = replica
        .call(replica.admin(Method::GET, "/api/plugins"))
        .await;
    let record = listed["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "max-tokens")
        .unwrap();
    assert_eq!(
        record["signature"]["trust"], "no_longer_trusted",
        "{listed}"
    );

    // Binding it again, or rolling back to it, is refused while policies
    // require signatures.
    let (status, body) = replica.set_chain("inference", chain).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "untrusted_signature"),
        "{body}"
    );
    let (status, body) = replica
        .call(replica.admin(Method::POST, "/api/admission/inference/rollback"))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "untrusted_signature"),
        "{body}"
    );
    let (status, _) = replica
        .call(replica.admin(Method::DELETE, &format!("/api/trust/keys/{key_id}")))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_evaluators_and_carrier_components_are_not_bound_once_their_kind_requires_signatures()
 {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&db, dir.path(), |config| {
        config.carrier_plugins = Some(plugins::dir());
    })
    .await;
    // A grant evaluator, uploaded unsigned, is not bound once grant
    // evaluators require signatures.
    let (status, _) = replica
        .push("grant-evaluator", "1.0.0", &component("grant-evaluator"))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body) = replica
        .call(
            replica
                .admin(Method::PUT, "/api/cluster/settings")
                .json(&json!({"require_signed": {"grant": true}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = replica
        .call(
            replica
                .admin(Method::PUT, "/api/federation/evaluator")
                .json(&json!({"plugin": "grant-evaluator", "version": "1.0.0", "settings": {}})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "signature_required"),
        "{body}"
    );

    // The seeded carrier components are unsigned; what runs keeps running.
    let (status, body) = replica
        .call(
            replica
                .admin(Method::PUT, "/api/cluster/settings")
                .json(&json!({"require_signed": {"carrier": true}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = replica
        .call(
            replica
                .admin(Method::POST, "/api/cluster/carrier")
                .json(&json!({"target": "tunnel", "dry_run": true})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "signature_required"),
        "{body}"
    );
    let (status, shown) = replica
        .call(replica.admin(Method::GET, "/api/cluster/carrier"))
        .await;
    assert_eq!(
        (status, shown["carrier"].clone()),
        (StatusCode::OK, json!("tunnel")),
        "{shown}"
    );
    replica.stop().await;
}
