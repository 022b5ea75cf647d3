//! Two (or more) independently run clusters on this machine, each with its
//! own database, frontend, worker and reference engine, for the federation
//! suite: joined, with an offer published and a grant completed.

use std::process::Stdio;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::cluster::{Cluster, PATIENCE};
use crate::process::WorkerProcess;

/// One cluster of a federation test.
pub struct Member {
    /// The frontend, its database and its library.
    pub cluster: Cluster,
    /// The label it presents to peers.
    pub label: String,
    /// Its worker, when it has one.
    _worker: Option<(WorkerProcess, tempfile::TempDir)>,
    /// Its ready deployment of `demo@r1`, when it has a worker.
    pub deployment: Option<String>,
}

impl Member {
    /// A cluster labelled `label` with no worker.
    pub async fn bare(label: &str) -> Self {
        Self::bare_with(label, &[]).await
    }

    /// [`Member::bare`] with more `serve` flags.
    pub async fn bare_with(label: &str, extra: &[&str]) -> Self {
        Self::bare_logging(label, extra, None).await
    }

    /// [`Member::bare_with`]; with `log`, the frontend logs at `info` into it.
    pub async fn bare_logging(label: &str, extra: &[&str], log: Option<Stdio>) -> Self {
        let mut flags = vec!["--federation-label", label];
        flags.extend(extra);
        let cluster = Cluster::start_logging(None, &flags, log).await;
        Self {
            cluster,
            label: label.to_string(),
            _worker: None,
            deployment: None,
        }
    }

    /// A cluster labelled `label` with a worker and a ready deployment of
    /// `demo@r1` on the reference engine, `fields` added to it.
    pub async fn serving(label: &str, fields: Value) -> Self {
        Self::serving_logging(label, fields, None).await
    }

    /// [`Member::serving`]; with `log`, the frontend logs at `info` into it.
    pub async fn serving_logging(label: &str, fields: Value, log: Option<Stdio>) -> Self {
        let mut member = Self::bare_logging(label, &[], log).await;
        let dir = tempfile::tempdir().unwrap();
        let worker = member
            .cluster
            .worker("w", dir.path(), &["--gpu", "name=L4,memory=24GiB"]);
        member._worker = Some((worker, dir));
        member.deployment = Some(member.cluster.deploy_ready(fields).await);
        member
    }

    /// Kills its worker with SIGKILL (its engine dies with it) and starts
    /// it again on the same folder: the same node comes back.
    pub fn kill_and_restart_worker(&mut self) {
        let (worker, dir) = self._worker.take().expect("a serving member");
        crate::batch::kill(worker.child.id());
        drop(worker);
        let restarted = self
            .cluster
            .worker("w", dir.path(), &["--gpu", "name=L4,memory=24GiB"]);
        self._worker = Some((restarted, dir));
    }

    /// The frontend's URL.
    pub fn url(&self) -> &str {
        &self.cluster.serve.url
    }

    /// An admin call.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.cluster.call(method, path, body).await
    }

    /// An admin call that must answer `expected`; its body.
    pub async fn expect(
        &self,
        expected: StatusCode,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let (status, answer) = self.call(method.clone(), path, body).await;
        assert_eq!(
            status, expected,
            "{method} {path} on {}: {answer}",
            self.label
        );
        answer
    }

    /// A fresh join token.
    pub async fn join_token(&self) -> String {
        let made = self
            .expect(
                StatusCode::CREATED,
                Method::POST,
                "/api/federation/join-token",
                None,
            )
            .await;
        made["join_token"].as_str().unwrap().to_string()
    }

    /// This cluster's `{cluster_id, label, public_key}`.
    pub async fn identity(&self) -> Value {
        self.expect(
            StatusCode::OK,
            Method::GET,
            "/api/federation/identity",
            None,
        )
        .await
    }

    /// A new API key with `scopes`; its token.
    pub async fn key(&self, scopes: &[&str]) -> String {
        let made = self
            .expect(
                StatusCode::CREATED,
                Method::POST,
                "/api/keys",
                Some(json!({"name": "fed", "scopes": scopes})),
            )
            .await;
        made["token"].as_str().unwrap().to_string()
    }

    /// Joins `other` (dialling it), naming it by its label; the peer record.
    pub async fn join(&self, other: &Member) -> Value {
        self.join_at(other, other.url()).await
    }

    /// [`Member::join`], dialling `other` at `url` (a proxy in front of it).
    pub async fn join_at(&self, other: &Member, url: &str) -> Value {
        let token = other.join_token().await;
        let peer = self
            .expect(
                StatusCode::CREATED,
                Method::POST,
                "/api/federation/peers",
                Some(json!({"url": url, "join_token": token, "label": other.label})),
            )
            .await;
        self.until_link_up(&other.label).await;
        other.until_link_up(&self.label).await;
        peer
    }

    /// Waits until the link to `peer` is up here.
    pub async fn until_link_up(&self, peer: &str) {
        self.cluster
            .until(
                &format!("/api/federation/peers/{peer}"),
                "the link never came up",
                |p| p["link"]["state"] == "up",
            )
            .await;
    }

    /// Publishes this cluster's deployment as service `service`.
    pub async fn offer_service(&self, service: &str) {
        let deployment = self.deployment.clone().expect("a serving member");
        self.expect(
            StatusCode::CREATED,
            Method::POST,
            "/api/federation/offers",
            Some(json!({"id": service, "resource": {"kind": "service", "deployment": deployment}})),
        )
        .await;
    }
}

/// `grantee` asks `owner` for `operations`, `owner` approves `spec`, the
/// grantee completes: the grant id, active on both sides.
pub async fn grant(owner: &Member, grantee: &Member, operations: &[&str], spec: Value) -> String {
    let request = grantee
        .expect(
            StatusCode::CREATED,
            Method::POST,
            &format!("/api/federation/peers/{}/requests", owner.label),
            Some(json!({"operations": operations, "note": "for the test"})),
        )
        .await;
    let id = request["id"].as_str().unwrap();
    let approved = owner
        .expect(
            StatusCode::CREATED,
            Method::POST,
            &format!("/api/federation/requests/{id}/approve"),
            Some(spec),
        )
        .await;
    let grant = approved["id"].as_str().unwrap().to_string();
    let completed = grantee
        .expect(
            StatusCode::OK,
            Method::POST,
            &format!("/api/federation/grants/{grant}/complete"),
            None,
        )
        .await;
    assert_eq!(completed["state"], "active", "{completed}");
    grant
}

/// Polls `check` until it answers `Some`, at most [`PATIENCE`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(started.elapsed() < PATIENCE, "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
