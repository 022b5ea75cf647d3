//! A PostgreSQL that accepts only TLS, as managed services do
//! (`start_tls_postgres` in scripts/common.sh: `hostssl` lines only, its
//! certificate from a private CA made at test time): a replica serves from
//! it with every connection encrypted (the pool, LISTENs and the pgbus
//! carrier's own), the server's certificate is checked as `sslmode` asks, and
//! a client certificate signs a role in.

use std::time::Duration;

use reqwest::StatusCode;
use switchyard_protocol::carrier::CarrierStatus;
use switchyard_store::Store;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::{connect, fresh_database_in};
use switchyard_tests::process::ServeProcess;
use switchyard_tests::switch::eventually_within;

/// How long a replica may take to serve once it listens: its carrier
/// connects within seconds when TLS works, and never when it does not.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// The TLS-only server's superuser URL (`sslmode=verify-full` with the CA).
fn tls_server() -> String {
    std::env::var("SWITCHYARD_TEST_TLS_DATABASE_URL").expect(
        "SWITCHYARD_TEST_TLS_DATABASE_URL is not set: start_private_postgres \
         (scripts/common.sh) starts the PostgreSQL that accepts only TLS and sets it",
    )
}

/// `url` (URL form) with the query parameters named in `set` replaced by
/// those given, and the ones named in `drop` removed.
fn with_params(url: &str, set: &[(&str, &str)], drop: &[&str]) -> String {
    let (head, query) = url.split_once('?').unwrap_or((url, ""));
    let mut params: Vec<String> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter(|p| {
            let key = p.split('=').next().unwrap_or_default();
            !drop.contains(&key) && !set.iter().any(|(k, _)| *k == key)
        })
        .map(str::to_string)
        .collect();
    params.extend(set.iter().map(|(k, v)| format!("{k}={v}")));
    format!("{head}?{}", params.join("&"))
}

/// Whether the session of `url` is encrypted, as the server sees it.
async fn encrypted(url: &str) -> bool {
    connect(url)
        .await
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_on_the_tunnel_carrier_serves_from_a_database_that_accepts_only_tls() {
    let verify_full = fresh_database_in(&tls_server()).await;
    // The audit's URL first: `require` and no root certificate, with which
    // the pool connected and the pgbus carrier's connections did not.
    let require = with_params(&verify_full, &[("sslmode", "require")], &["sslrootcert"]);
    for url in [require, verify_full] {
        let dir = tempfile::tempdir().unwrap();
        // No NATS URL: the `tunnel` set, whose messages ride pgbus on the database.
        let serve = ServeProcess::on_set(&url, dir.path(), None, &[]);
        let http = reqwest::Client::new();
        let healthz = http
            .get(format!("{}/healthz", serve.url))
            .timeout(READY_WITHIN)
            .send()
            .await
            .expect("/healthz answered");
        assert_eq!(healthz.status(), StatusCode::OK);
        let carrier_ready = || async {
            let status: CarrierStatus = http
                .get(format!("{}/api/cluster/carrier", serve.url))
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            status.carrier.as_deref() == Some("tunnel") && status.replicas.iter().all(|r| r.ready)
        };
        eventually_within(
            "the tunnel carrier is ready on every replica",
            READY_WITHIN,
            carrier_ready,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_s_certificate_is_checked_as_sslmode_asks() {
    let db = fresh_database_in(&tls_server()).await;
    assert!(encrypted(&db).await, "verify-full with the private CA");
    for mode in ["prefer", "allow", "require", "verify-ca"] {
        let url = with_params(&db, &[("sslmode", mode)], &[]);
        assert!(encrypted(&url).await, "sslmode={mode}");
    }

    // The server accepts no plain connection.
    let plain = with_params(&db, &[("sslmode", "disable")], &[]);
    let refused = Store::connect(&plain)
        .await
        .expect_err("plain was accepted");
    assert!(refused.to_string().contains("no encryption"), "{refused}");

    // The private CA is not among the system's roots.
    let system = with_params(&db, &[], &["sslrootcert"]);
    let refused = Store::connect(&system)
        .await
        .expect_err("an unknown CA was trusted");
    assert!(refused.to_string().contains("certificate"), "{refused}");

    // Reached by a name its certificate does not hold: verify-full refuses,
    // verify-ca (the chain only) accepts.
    let elsewhere = |mode: &str| {
        let hostaddr = with_params(&db, &[("hostaddr", "127.0.0.1"), ("sslmode", mode)], &[]);
        hostaddr.replacen("@localhost:", "@not-in-the-certificate.invalid:", 1)
    };
    let refused = Store::connect(&elsewhere("verify-full"))
        .await
        .expect_err("a certificate for another name was accepted");
    assert!(refused.to_string().contains("certificate"), "{refused}");
    assert!(encrypted(&elsewhere("verify-ca")).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_signs_in_the_role_that_must_present_one() {
    let with_certificate = std::env::var("SWITCHYARD_TEST_TLS_CLIENT_URL")
        .expect("SWITCHYARD_TEST_TLS_CLIENT_URL is not set: start_private_postgres sets it");
    let client = connect(&with_certificate).await;
    let row = client
        .query_one(
            "SELECT current_user::text, s.client_dn FROM pg_stat_ssl s WHERE s.pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    let (user, dn): (String, Option<String>) = (row.get(0), row.get(1));
    assert_eq!(user, "switchyard_tls_client");
    assert_eq!(dn.as_deref(), Some("/CN=switchyard_tls_client"));

    let without = with_params(&with_certificate, &[], &["sslcert", "sslkey"]);
    let refused = Store::connect(&without)
        .await
        .expect_err("no certificate was accepted");
    assert!(
        refused.to_string().contains("valid client certificate"),
        "{refused}"
    );
}
