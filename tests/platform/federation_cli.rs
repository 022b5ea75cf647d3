//! `switchyard federation ...` as a real process: `key init` offline (a
//! 0600 file, never overwritten, the secret never printed), and the
//! commands against one real replica: identity, a rotated join token with
//! the join line, offers, status, and the refusals a single cluster can
//! show (an unreachable peer, a missing deployment, an unknown peer) with
//! their codes. A manage call prints its operation id before it is sent.
//! The grant evaluator's generations (`evaluator show|set|rollback`), and
//! `identity --adopt` after the replica's key file was replaced.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use reqwest::Method;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins;
use switchyard_tests::process::binary;
use switchyard_tests::replica::Replica;

/// Exit code, stdout and stderr of `switchyard federation <args>` (against
/// `url` when one is given), stdin closed.
fn federation(url: Option<&str>, args: &[&str]) -> (i32, String, String) {
    let output = tokio::task::block_in_place(|| {
        let mut command = Command::new(binary());
        command.arg("federation").args(args);
        if let Some(url) = url {
            command.args(["--server", url]);
        }
        command
            .env("SWITCHYARD_TOKEN", ADMIN_TOKEN)
            .env_remove("SWITCHYARD_DATA_DIR")
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

/// A port nothing listens on (bound, then let go).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_init_writes_a_private_key_file_once_and_never_prints_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys").join("cluster.key");
    let file_arg = file.to_str().unwrap();

    let (code, out, err) = federation(None, &["key", "init", "--file", file_arg]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("wrote {file_arg}")), "{out}");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the key file is private");
    let dir_mode = std::fs::metadata(file.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700, "its directory too");
    let public_key = out
        .lines()
        .find_map(|l| l.strip_prefix("public key: "))
        .unwrap_or_else(|| panic!("no public key printed: {out}"));
    assert_eq!(public_key.len(), 64, "{public_key}");
    // The file holds the secret seed; no part of it is printed.
    let written = std::fs::read_to_string(&file).unwrap();
    let secret = written.split_whitespace().last().unwrap();
    assert_eq!(secret.len(), 64);
    assert!(!out.contains(secret) && !err.contains(secret));

    let (code, out, err) = federation(None, &["key", "init", "--file", file_arg]);
    assert_eq!(code, 2, "a key file is never overwritten: {out}");
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        written,
        "untouched"
    );

    // Without --file: `<data-dir>/federation/cluster.key`, as serve reads it.
    let data = dir.path().join("data");
    let (code, out, err) = federation(
        None,
        &[
            "key",
            "init",
            "--data-dir",
            data.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let printed: serde_json::Value = serde_json::from_str(&out).unwrap();
    let default = data.join("federation").join("cluster.key");
    assert_eq!(printed["path"], default.to_str().unwrap());
    assert!(default.is_file());
    assert_ne!(printed["public_key"], public_key, "a new key each time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_shows_identity_token_offers_and_status_and_the_apis_refusals() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&db, dir.path(), |config| {
        config.federation_label = Some("west".into());
    })
    .await;
    let url = replica.url.as_str();
    let (_, identity) = replica
        .call(replica.admin(Method::GET, "/api/federation/identity"))
        .await;
    let cluster_id = identity["cluster_id"].as_str().unwrap();
    let public_key = identity["public_key"].as_str().unwrap();

    let (code, out, err) = federation(Some(url), &["identity"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("cluster id:  {cluster_id}\n")),
        "{out}"
    );
    assert!(out.contains("label:       west\n"), "{out}");
    assert!(
        out.contains(&format!("public key:  {public_key}\n")),
        "{out}"
    );
    let (code, out, _) = federation(Some(url), &["identity", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        identity
    );

    // The token is shown only when made.
    let (code, _, err) = federation(Some(url), &["token"]);
    assert_eq!(code, 2);
    assert!(err.contains("--rotate"), "{err}");
    let (code, out, err) = federation(Some(url), &["token", "--rotate"]);
    assert_eq!(code, 0, "{out}{err}");
    let token = out
        .lines()
        .find_map(|l| l.strip_prefix("join token (shown once; the previous one no longer works): "))
        .unwrap_or_else(|| panic!("no token printed: {out}"));
    assert!(!token.is_empty());
    assert!(
        out.contains(&format!(
            "switchyard federation join --url {url} --token {token} --label west\n"
        )),
        "{out}"
    );
    let (code, again, _) = federation(Some(url), &["token", "--rotate"]);
    assert_eq!(code, 0);
    assert!(!again.contains(token), "each rotation makes a new token");

    // A deployment that does not exist is refused with the API's code.
    let (code, out, err) = federation(
        Some(url),
        &[
            "offers",
            "publish",
            "--service",
            "chat",
            "--deployment",
            "dep_missing",
        ],
    );
    assert_eq!(code, 2, "{out}");
    assert!(
        err.contains("invalid_request") && err.contains("dep_missing"),
        "{err}"
    );
    // A runtime offer needs nothing to exist; it counts against the bound.
    let (code, out, err) = federation(Some(url), &["offers", "publish", "--runtime", "reference"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("published runtime offer reference-0gpu"),
        "{out}"
    );
    let (code, out, _) = federation(Some(url), &["offers"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("offers (1/256)\n"), "{out}");
    assert!(out.contains("reference-0gpu"), "{out}");

    let (code, out, err) = federation(Some(url), &["status"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("identity:    verified\n"), "{out}");
    assert!(
        out.contains(&format!("cluster:     west ({cluster_id})")),
        "{out}"
    );
    assert!(
        out.contains("bounds:      peers 0/128, offers 1/256, grants 0/256, operations 0/2048"),
        "{out}"
    );
    let (code, out, _) = federation(Some(url), &["status", "--json"]);
    assert_eq!(code, 0);
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["identity"], "verified");
    let (code, out, err) = federation(Some(url), &["offers", "withdraw", "reference-0gpu"]);
    assert_eq!(code, 0, "{out}{err}");
    let (_, out, _) = federation(Some(url), &["offers", "--json"]);
    let offers: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(offers["offers"], serde_json::json!([]));

    // No cluster listens there: nothing is kept.
    let far = format!("http://127.0.0.1:{}", closed_port());
    let (code, out, err) = federation(
        Some(url),
        &[
            "join",
            "--url",
            &far,
            "--token",
            "fjt_whatever",
            "--label",
            "east",
        ],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("NODE_UNAVAILABLE"), "{err}");
    let (code, out, _) = federation(Some(url), &["peers"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("peers (0/128)\n"), "{out}");
    let (code, _, err) = federation(Some(url), &["peers", "show", "east"]);
    assert_eq!(code, 2);
    assert!(err.contains("not_found"), "{err}");

    // A manage call: the operation id is printed before the request is
    // sent, and named again with the refusal.
    let (code, out, err) = federation(
        Some(url),
        &[
            "services",
            "start",
            "--peer",
            "east",
            "--grant",
            "g1",
            "--service",
            "chat",
            "--revision",
            "1",
        ],
    );
    assert_eq!(code, 2, "{out}");
    let operation = out
        .lines()
        .find_map(|l| l.strip_prefix("operation "))
        .and_then(|l| l.split_once(": sending start to east under grant g1"))
        .map(|(id, _)| id.to_string())
        .unwrap_or_else(|| panic!("no operation id before sending: {out}"));
    assert!(
        operation.starts_with("op_") && operation.len() == 19,
        "{operation}"
    );
    assert!(err.contains("not_found"), "{err}");
    assert!(err.contains(&operation), "{err}");
    // A given id is used as it is.
    let (code, out, _) = federation(
        Some(url),
        &[
            "services",
            "stop",
            "--peer",
            "east",
            "--grant",
            "g1",
            "--service",
            "chat",
            "--revision",
            "1",
            "--operation-id",
            "op_mine",
        ],
    );
    assert_eq!(code, 2);
    assert!(
        out.starts_with("operation op_mine: sending stop to east"),
        "{out}"
    );

    let (code, out, err) = federation(Some(url), &["services"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("remote services (0)"), "{out}");
    let (code, out, err) = federation(Some(url), &["requests"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("requests (0)\n"), "{out}");
    let (code, out, err) = federation(Some(url), &["grants"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("grants (0/256)\n"), "{out}");
    let (code, _, err) = federation(Some(url), &["operations", "east", "op_mine"]);
    assert_eq!(code, 2);
    assert!(err.contains("not_found"), "{err}");
    replica.stop().await;
}

/// The value of `--json` output.
fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_pair_through_the_cli_from_join_to_revoke() {
    let (west_db, east_db) = (fresh_database().await, fresh_database().await);
    let (west_dir, east_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let west = Replica::with(&west_db, west_dir.path(), |c| {
        c.federation_label = Some("west".into());
        // The link runs on the tunnel component.
        c.carrier_plugins = Some(plugins::dir());
    })
    .await;
    let east = Replica::with(&east_db, east_dir.path(), |c| {
        c.federation_label = Some("east".into());
        // The link runs on the tunnel component.
        c.carrier_plugins = Some(plugins::dir());
    })
    .await;
    let (w, e) = (Some(west.url.as_str()), Some(east.url.as_str()));

    // The line `token --rotate` prints on east joins from west as it is.
    let (code, out, err) = federation(e, &["token", "--rotate"]);
    assert_eq!(code, 0, "{out}{err}");
    let line = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("switchyard federation "))
        .unwrap()
        .to_string();
    let args: Vec<&str> = line.split(' ').collect();
    assert_eq!(args[..3], ["join", "--url", east.url.as_str()]);
    let (code, out, err) = federation(w, &args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("joined\npeer:            east ("), "{out}");
    assert!(out.contains("link:            up"), "{out}");
    let (code, out, err) = federation(w, &args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("already joined"), "{out}");
    let (code, out, _) = federation(w, &["peers"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("peers (1/128)\n"), "{out}");
    assert!(out.contains("  east ") && out.contains(&east.url), "{out}");

    // west asks; east sees the request and approves exact terms.
    let (code, out, err) = federation(
        w,
        &[
            "request",
            "east",
            "--operations",
            "inference,inference:manage",
            "--note",
            "tests",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("asked east for inference, inference:manage: request req_"),
        "{out}"
    );
    let (code, out, _) = federation(e, &["requests", "--json"]);
    assert_eq!(code, 0);
    let requests = json(&out);
    let request = requests["requests"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(requests["requests"][0]["direction"], "incoming");
    let (code, out, err) = federation(e, &["offers", "publish", "--runtime", "reference"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = federation(
        e,
        &[
            "approve",
            &request,
            "--operations",
            "inference:manage",
            "--lifetime",
            "1h",
            "--max-concurrent",
            "2",
            "--max-requests",
            "10",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("status:             inactive (state offered)"),
        "{out}"
    );
    let (code, out, _) = federation(w, &["grants", "--json"]);
    assert_eq!(code, 0);
    let grant = json(&out)["grants"][0]["id"].as_str().unwrap().to_string();

    // west completes: both signatures, active on both sides with its quota.
    let (code, out, err) = federation(w, &["complete", &grant]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("status:             active (state active)"),
        "{out}"
    );
    assert!(!out.contains("- (not completed)"), "{out}");
    for (side, direction) in [(w, "incoming"), (e, "outgoing")] {
        let (code, out, err) = federation(side, &["status"]);
        assert_eq!(code, 0, "{out}{err}");
        let row: Vec<&str> = out
            .lines()
            .find(|l| l.contains(&grant))
            .unwrap_or_else(|| panic!("{out}"))
            .split_whitespace()
            .collect();
        assert_eq!(
            row,
            [grant.as_str(), direction, "active", "10", "2", "0", "-"],
            "{out}"
        );
    }

    // A managed service outside the grant: refused by the owner, with the
    // operation id shown first and named again.
    let (code, out, err) = federation(
        w,
        &[
            "services",
            "create",
            "--peer",
            "east",
            "--grant",
            &grant,
            "--service",
            "chat",
            "--model",
            "m@r",
            "--runtime",
            "reference-0gpu",
            "--machines",
            "n1",
        ],
    );
    assert_eq!(code, 2, "{out}");
    let operation = out
        .strip_prefix("operation ")
        .and_then(|l| l.split_once(':'))
        .map(|(id, _)| id)
        .unwrap_or_else(|| panic!("{out}"));
    assert!(err.contains(operation) && err.contains("403"), "{err}");
    let (code, out, err) = federation(
        w,
        &["services", "list", "--peer", "east", "--grant", &grant],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("(0)"), "{out}");

    // east revokes; west's refresh sees it; both retire it.
    let (code, out, err) = federation(e, &["revoke", &grant]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with(&format!("revoked grant {grant}: new calls are refused")),
        "{out}"
    );
    let (code, out, err) = federation(w, &["grants", "show", &grant]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("revoked"), "{out}");
    for side in [w, e] {
        let (code, out, err) = federation(side, &["grants", "retire", &grant]);
        assert_eq!(code, 0, "{out}{err}");
    }
    let (code, out, err) = federation(w, &["peers", "forget", "east"]);
    assert_eq!(code, 0, "{out}{err}");
    let (_, out, _) = federation(w, &["peers", "--json"]);
    assert_eq!(json(&out)["peers"], serde_json::json!([]));
    west.stop().await;
    east.stop().await;
}

/// `switchyard federation evaluator show|set|rollback` against a replica
/// that seeds `grant-standard@0.1.0` as the binary does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_shows_sets_and_rolls_back_the_grant_evaluator() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&db, dir.path(), |config| {
        config.federation_label = Some("west".into());
        config.seed_components = vec![switchyard_server::SeedComponent {
            name: "grant-standard".into(),
            kind: switchyard_runtime::PluginKind::Grant,
            version: "0.1.0".into(),
            bytes: plugins::component("grant-standard").into(),
        }];
    })
    .await;
    let url = Some(replica.url.as_str());

    // Nothing bound: the shipped grant-standard at generation 0.
    let (code, out, err) = federation(url, &["evaluator", "show"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with(
            "generation:  0 (no binding yet)\nevaluator:   grant-standard 0.1.0 (shipped with the binary)\n"
        ),
        "{out}"
    );
    assert!(out.contains("settings:    {}\n"), "{out}");
    assert!(out.contains("history (0)\n"), "{out}");
    let (code, out, _) = federation(url, &["evaluator", "show", "--json"]);
    assert_eq!(code, 0);
    let shown = json(&out);
    assert_eq!(
        (&shown["generation"], &shown["plugin"], &shown["shipped"]),
        (
            &serde_json::json!(0),
            &serde_json::json!("grant-standard"),
            &serde_json::json!(true)
        ),
        "{shown}"
    );

    // A binding is a new generation.
    let (code, out, err) = federation(
        url,
        &[
            "evaluator",
            "set",
            "--plugin",
            "grant-standard",
            "--version",
            "0.1.0",
            "--settings",
            r#"{"deny_peers":["x"]}"#,
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("grant evaluator generation 1: grant-standard 0.1.0\n"),
        "{out}"
    );
    assert!(
        out.contains(r#"settings:    {"deny_peers":["x"]}"#),
        "{out}"
    );
    let (code, out, _) = federation(url, &["evaluator", "show", "--json"]);
    assert_eq!(code, 0);
    let shown = json(&out);
    assert_eq!(shown["generation"], 1, "{shown}");
    assert_eq!(shown["shipped"], false, "{shown}");
    assert_eq!(shown["settings"], serde_json::json!({"deny_peers": ["x"]}));
    assert_eq!(shown["history"].as_array().unwrap().len(), 1, "{shown}");

    // Settings the plugin refuses are refused with its code; settings that
    // are not JSON never leave the CLI. Generation 1 stays in force.
    let (code, out, err) = federation(
        url,
        &[
            "evaluator",
            "set",
            "--plugin",
            "grant-standard",
            "--version",
            "0.1.0",
            "--settings",
            r#"{"deny_peers":[""]}"#,
        ],
    );
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("invalid_settings"), "{err}");
    let settings = dir.path().join("settings.json");
    std::fs::write(&settings, "{not json").unwrap();
    let at_file = format!("@{}", settings.display());
    let (code, _, err) = federation(
        url,
        &[
            "evaluator",
            "set",
            "--plugin",
            "grant-standard",
            "--version",
            "0.1.0",
            "--settings",
            &at_file,
        ],
    );
    assert_eq!(code, 2);
    assert!(err.contains("is not JSON"), "{err}");
    let (_, out, _) = federation(url, &["evaluator", "show", "--json"]);
    assert_eq!(json(&out)["generation"], 1, "nothing was stored");

    // Rollback: only to an older generation; to 0 is the shipped one again,
    // as a new generation; then there is nothing older to roll back to.
    let (code, _, err) = federation(url, &["evaluator", "rollback", "--generation", "5"]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid_request"), "{err}");
    let (code, out, err) = federation(url, &["evaluator", "rollback", "--generation", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with(
            "grant evaluator generation 2: the shipped grant-standard (rollback to 0)\n"
        ),
        "{out}"
    );
    let (code, out, _) = federation(url, &["evaluator", "show"]);
    assert_eq!(code, 0);
    assert!(out.contains("history (2)\n"), "{out}");
    assert!(out.contains("settings:    {}\n"), "{out}");
    let (code, _, err) = federation(url, &["evaluator", "rollback"]);
    assert_eq!(code, 2);
    assert!(err.contains("nothing_to_rollback"), "{err}");

    // Each replica's generation: this one follows to 2.
    switchyard_tests::switch::eventually("the replica serves generation 2", || async {
        let (_, out, _) = federation(url, &["evaluator", "show", "--json"]);
        let shown = json(&out);
        shown["replicas"]
            .as_array()
            .is_some_and(|r| r.len() == 1 && r[0]["generation"] == 2 && r[0]["status"] == "current")
    })
    .await;
    let (_, out, _) = federation(url, &["evaluator", "show"]);
    assert!(out.contains("replicas (1)\n"), "{out}");
    let line = out.lines().last().unwrap();
    assert!(line.contains(" 2 ") && line.contains("current"), "{out}");
}

/// A replica whose key file was replaced is suspended (`identity_mismatch`)
/// until `identity --adopt` makes its key the cluster's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_adopt_makes_a_replaced_key_file_the_clusters_key() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&db, dir.path(), |config| {
        config.federation_label = Some("west".into());
    })
    .await;
    let url = Some(replica.url.as_str());
    let (code, out, _) = federation(url, &["status"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("identity:    verified\n"), "{out}");

    // Another key, put where this replica reads its key.
    let other = dir.path().join("other").join("cluster.key");
    let (code, out, err) = federation(None, &["key", "init", "--file", other.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let new_key = out
        .lines()
        .find_map(|l| l.strip_prefix("public key: "))
        .unwrap()
        .to_string();
    let key_file = switchyard_federation::identity::default_key_path(dir.path());
    assert!(key_file.is_file(), "the replica made its key there");
    std::fs::copy(&other, &key_file).unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    switchyard_tests::switch::eventually("the replica sees the replaced key", || async {
        let (_, out, _) = federation(url, &["status"]);
        out.starts_with("identity:    identity_mismatch\n")
    })
    .await;

    let (code, out, err) = federation(url, &["identity", "--adopt"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("public key:  {new_key}\n")), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("warning: every peer") && l.contains("both sides")),
        "{out}"
    );
    let (code, out, _) = federation(url, &["status"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("identity:    verified\n"), "{out}");
    assert!(out.contains(&format!("public key:  {new_key}\n")), "{out}");
    let (_, identity) = replica
        .call(replica.admin(Method::GET, "/api/federation/identity"))
        .await;
    assert_eq!(identity["public_key"], new_key.as_str());
    // With --json: the API's identity on stdout, the warning on stderr.
    let (code, out, err) = federation(url, &["identity", "--adopt", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(json(&out), identity);
    assert!(err.starts_with("warning: every peer"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_drain_and_undrain_change_whether_peers_may_choose_the_cluster() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&db, dir.path(), |config| {
        config.federation_label = Some("west".into());
    })
    .await;
    let url = Some(replica.url.as_str());
    let (code, out, err) = federation(url, &["maintenance", "--reason", "host maintenance"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        "maintenance (host maintenance): peers may not choose this cluster as the owner of new \
         jobs; 0 jobs of this cluster running\n"
    );
    // Nothing runs here: a drain that waits is done at once.
    let (code, out, err) = federation(url, &["drain", "--reason", "move racks", "--wait"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("draining (move racks): "), "{out}");
    assert!(
        out.ends_with("drained: no job of this cluster is running\n"),
        "{out}"
    );
    let (code, out, err) = federation(url, &["undrain", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["state"], "eligible", "{shown}");
    assert_eq!(shown["active_jobs"], 0, "{shown}");
    // A reason longer than 256 characters is refused with its code.
    let long = "x".repeat(300);
    let (code, _, err) = federation(url, &["maintenance", "--reason", &long]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("invalid_request"), "{err}");
}
