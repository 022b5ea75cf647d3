//! `switchyard carrier status|switch|abort` as a real process against a
//! replica: what it prints, that it asks before it starts (and refuses to
//! start unasked off a terminal), and `--yes --wait` drawing a whole
//! change `tunnel → nats` until it settled.

use std::process::{Command, Stdio};

use reqwest::Method;
use serde_json::json;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::nats::NatsServer;
use switchyard_tests::plugins;
use switchyard_tests::process::binary;
use switchyard_tests::replica::Replica;

/// Exit code, stdout and stderr of `switchyard <args> --server <url>`,
/// stdin closed (not a terminal).
fn switchyard(url: &str, args: &[&str]) -> (i32, String, String) {
    let output = tokio::task::block_in_place(|| {
        Command::new(binary())
            .args(args)
            .args(["--server", url])
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_shows_the_carrier_asks_before_a_switch_and_waits_for_it() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&db, dir.path(), |config| {
        config.carrier_plugins = Some(plugins::dir());
    })
    .await;
    let url = replica.url.as_str();

    let (code, out, err) = switchyard(url, &["carrier", "status"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("carrier:    tunnel\n"), "{out}");
    assert!(out.contains("state:      stable\n"), "{out}");
    assert!(out.contains("replicas (1)\n"), "{out}");

    let (code, out, err) = switchyard(url, &["carrier", "switch", "--to", "bogus"]);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("unknown_target"), "{err}");
    let (code, out, err) = switchyard(url, &["carrier", "switch", "--to", "tunnel", "--dry-run"]);
    assert_eq!(code, 1, "a blocked preflight fails: {out}{err}");
    assert!(out.starts_with("preflight → tunnel: blocked\n"), "{out}");
    assert!(out.contains("blocker already_active"), "{out}");
    let (code, out, err) = switchyard(url, &["carrier", "abort"]);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("nothing_to_abort"), "{err}");

    let nats = NatsServer::start(&[]);
    let (status, saved) = replica
        .call(
            replica
                .admin(Method::PUT, "/api/cluster/settings")
                .json(&json!({"nats_url": format!("nats://{}", nats.address())})),
        )
        .await;
    assert!(status.is_success(), "{saved}");
    let epoch = || async {
        let (_, row) = replica
            .call(replica.admin(Method::GET, "/api/cluster/carrier"))
            .await;
        row["epoch"].as_i64().unwrap()
    };
    let before = epoch().await;
    let (code, out, err) = switchyard(url, &["carrier", "switch", "--to", "nats"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("preflight → nats: ok\n"), "{out}{err}");
    assert!(err.contains("pass --yes"), "{err}");
    assert_eq!(epoch().await, before, "nothing started unasked");

    let (code, out, err) = switchyard(
        url,
        &["carrier", "switch", "--to", "nats", "--yes", "--wait"],
    );
    assert_eq!(code, 0, "{out}{err}");
    println!("{out}");
    let phases: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| ["prepare", "commit", "stable", "aborted"].contains(w))
        .collect();
    assert_eq!(phases, ["prepare", "commit", "stable"], "{out}");
    assert!(out.contains("settled on nats"), "{out}");
    let (code, out, _) = switchyard(url, &["carrier", "status"]);
    assert_eq!(code, 0);
    assert!(out.contains("carrier:    nats\n"), "{out}");
    replica.stop().await;
}
