//! `switchyard federation requests|request|approve|share|grants|complete|revoke`:
//! pairing. The grantee asks for operations, the owner approves exact
//! resources (or shares unprompted), the grantee completes; the owner
//! revokes; either side retires what is no longer active.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::Method;
use switchyard_protocol::federation::{
    AccessRequest, GrantRecord, GrantSpec, MAX_GRANTS, NewAccessRequest, Operation, Revoked,
};

use super::carrier::{list_or_dash, row, table};
use super::federation::{print_json, segment, typed};
use crate::cli::federation::{GrantArgs, GrantsAction, Output};
use crate::client::Client;

/// Lists requests, or discards one.
pub async fn requests(discard: Option<String>, out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    if let Some(id) = discard {
        let path = format!("/api/federation/requests/{}", segment(&id));
        client.send(client.request(Method::DELETE, &path)).await?;
        println!("discarded request {id}");
        return Ok(ExitCode::SUCCESS);
    }
    let body = client
        .send(client.request(Method::GET, "/api/federation/requests"))
        .await?;
    if out.json {
        return print_json(&body);
    }
    let requests: Vec<AccessRequest> = typed(body["requests"].clone())?;
    let mut rows = vec![row([
        "ID",
        "PEER",
        "DIRECTION",
        "STATE",
        "OPERATIONS",
        "GRANT",
        "NOTE",
    ])];
    for r in &requests {
        rows.push(vec![
            r.id.clone(),
            r.peer.clone(),
            r.direction.as_str().to_string(),
            r.state.to_string(),
            operations(&r.operations),
            r.grant.clone().unwrap_or_else(|| "-".into()),
            r.note.clone(),
        ]);
    }
    print!("requests ({})\n{}", requests.len(), table(&rows));
    Ok(ExitCode::SUCCESS)
}

/// Asks a peer for operations.
pub async fn request(
    peer: String,
    operations: Vec<Operation>,
    note: String,
    out: Output,
) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let path = format!("/api/federation/peers/{}/requests", segment(&peer));
    let body = client
        .send_json(Method::POST, &path, &NewAccessRequest { operations, note })
        .await?;
    if out.json {
        return print_json(&body);
    }
    let made: AccessRequest = typed(body)?;
    println!(
        "asked {} for {}: request {} ({}); its operator approves it with \
         `switchyard federation approve {} ...`",
        made.peer,
        self::operations(&made.operations),
        made.id,
        made.state,
        made.id
    );
    Ok(ExitCode::SUCCESS)
}

/// The spec `approve` and `share` send.
pub fn spec(peer: Option<String>, grant: GrantArgs) -> GrantSpec {
    GrantSpec {
        peer,
        operations: grant.operations,
        services: grant.services,
        models: grant.models,
        machines: grant.machines,
        lifetime_s: grant.lifetime,
        max_concurrent: grant.max_concurrent,
        max_requests: grant.max_requests,
        max_model_bytes: grant.max_model_bytes,
        stop_on_revoke: grant.stop_on_revoke,
    }
}

/// Approves a peer's request with exact resources.
pub async fn approve(request: String, grant: GrantArgs, out: Output) -> anyhow::Result<ExitCode> {
    let path = format!("/api/federation/requests/{}/approve", segment(&request));
    offer(&path, spec(None, grant), out).await
}

/// Shares resources with a peer unprompted.
pub async fn share(peer: String, grant: GrantArgs, out: Output) -> anyhow::Result<ExitCode> {
    offer("/api/federation/grants", spec(Some(peer), grant), out).await
}

/// Posts a grant spec and shows the grant offered.
async fn offer(path: &str, spec: GrantSpec, out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let body = client.send_json(Method::POST, path, &spec).await?;
    if out.json {
        return print_json(&body);
    }
    let grant: GrantRecord = typed(body)?;
    println!(
        "offered grant {} to {}; it is active once the peer runs \
         `switchyard federation complete {}`",
        grant.id, grant.peer, grant.id
    );
    print!("{}", render_grant(&grant, now_ms()));
    Ok(ExitCode::SUCCESS)
}

/// Lists grants, or shows, refreshes or retires one.
pub async fn grants(action: Option<GrantsAction>, out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let (method, path) = match &action {
        None => (Method::GET, "/api/federation/grants".to_string()),
        Some(GrantsAction::Show { id }) => (
            Method::GET,
            format!("/api/federation/grants/{}", segment(id)),
        ),
        Some(GrantsAction::Refresh { id }) => (
            Method::POST,
            format!("/api/federation/grants/{}/refresh", segment(id)),
        ),
        Some(GrantsAction::Retire { id }) => (
            Method::DELETE,
            format!("/api/federation/grants/{}", segment(id)),
        ),
    };
    let body = client.send(client.request(method, &path)).await?;
    match action {
        Some(GrantsAction::Retire { id }) => {
            println!("retired grant {id} with its operation receipts");
        }
        _ if out.json => return print_json(&body),
        None => {
            let grants: Vec<GrantRecord> = typed(body["grants"].clone())?;
            print!("{}", render_grants(&grants, now_ms()));
        }
        Some(_) => print!("{}", render_grant(&typed(body)?, now_ms())),
    }
    Ok(ExitCode::SUCCESS)
}

/// Completes a grant a peer offered.
pub async fn complete(id: String, out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let path = format!("/api/federation/grants/{}/complete", segment(&id));
    let body = client.send(client.request(Method::POST, &path)).await?;
    if out.json {
        return print_json(&body);
    }
    let grant: GrantRecord = typed(body)?;
    println!("completed grant {}: both keys signed its terms", grant.id);
    print!("{}", render_grant(&grant, now_ms()));
    Ok(ExitCode::SUCCESS)
}

/// Revokes a grant this cluster owns.
pub async fn revoke(id: String, out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let path = format!("/api/federation/grants/{}/revoke", segment(&id));
    let body = client.send(client.request(Method::POST, &path)).await?;
    if out.json {
        return print_json(&body);
    }
    let revoked: Revoked = typed(body)?;
    let told = if revoked.peer_notified {
        "the peer was told"
    } else {
        "the peer could not be told now"
    };
    println!(
        "revoked grant {}: new calls are refused; {told}",
        revoked.id
    );
    Ok(ExitCode::SUCCESS)
}

/// The grants as a table.
pub fn render_grants(grants: &[GrantRecord], now_ms: u64) -> String {
    let mut rows = vec![row([
        "ID",
        "PEER",
        "DIRECTION",
        "STATUS",
        "OPERATIONS",
        "REQUESTS",
        "EXPIRES",
    ])];
    for g in grants {
        rows.push(vec![
            g.id.clone(),
            g.peer.clone(),
            g.direction.as_str().to_string(),
            g.status.to_string(),
            operations(&g.terms.operations),
            format!("{}/{}", g.usage.requests, g.terms.max_requests),
            expires(g.terms.expires_at_unix_ms, now_ms),
        ]);
    }
    format!("grants ({}/{MAX_GRANTS})\n{}", grants.len(), table(&rows))
}

/// One grant: its terms, usage and signatures, a field a line.
pub fn render_grant(g: &GrantRecord, now_ms: u64) -> String {
    let t = &g.terms;
    let mut out = String::new();
    let mut field = |name: &str, value: String| {
        out.push_str(&format!("{:<20}{value}\n", format!("{name}:")));
    };
    field("grant", g.id.clone());
    field("peer", format!("{} ({})", g.peer, g.direction.as_str()));
    field(
        "status",
        format!("{} (state {})", g.status, g.state.as_str()),
    );
    field(
        "owner",
        format!("{} ({})", t.owner.label, t.owner.cluster_id),
    );
    field(
        "grantee",
        format!("{} ({})", t.grantee.label, t.grantee.cluster_id),
    );
    field("request", t.request.clone().unwrap_or_else(|| "-".into()));
    field("operations", operations(&t.operations));
    field("services", list_or_dash(t.services.iter().cloned()));
    field("models", list_or_dash(t.models.iter().cloned()));
    field("machines", list_or_dash(t.machines.iter().cloned()));
    field("expires", expires(t.expires_at_unix_ms, now_ms));
    field(
        "requests",
        format!("{} of {}", g.usage.requests, t.max_requests),
    );
    field(
        "in flight",
        format!("{} of {}", g.usage.in_flight, t.max_concurrent),
    );
    field(
        "model bytes",
        format!("{} of {}", g.usage.model_bytes, t.max_model_bytes),
    );
    field("tokens", g.usage.tokens.to_string());
    field(
        "stop on revoke",
        if t.stop_on_revoke { "yes" } else { "no" }.into(),
    );
    field("owner signature", g.owner_signature.clone());
    field(
        "grantee signature",
        g.grantee_signature
            .clone()
            .unwrap_or_else(|| "- (not completed)".into()),
    );
    field(
        "last verified",
        g.last_verified_at.clone().unwrap_or_else(|| "-".into()),
    );
    out
}

/// `inference, inference:manage`.
fn operations(operations: &[Operation]) -> String {
    list_or_dash(operations.iter().map(|o| o.as_str().to_string()))
}

/// `in 2d 3h`, `in 59m`, `expired`.
pub fn expires(at_ms: u64, now_ms: u64) -> String {
    if at_ms <= now_ms {
        return "expired".into();
    }
    let s = (at_ms - now_ms) / 1000;
    let (d, h, m) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    match (d, h) {
        (0, 0) if m == 0 => format!("in {s}s"),
        (0, 0) => format!("in {m}m"),
        (0, _) => format!("in {h}h {m}m"),
        _ => format!("in {d}d {h}h"),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::federation::FederationCommand;
    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Result<FederationCommand, clap::Error> {
        Cli::try_parse_from(["switchyard", "federation"].iter().chain(args)).map(|cli| {
            let Command::Federation(command) = cli.command else {
                panic!("not a federation command");
            };
            command
        })
    }

    #[test]
    fn approve_sends_exactly_the_resources_and_limits_given() {
        let command = parse(&[
            "approve",
            "req_1",
            "--services",
            "chat,embed",
            "--models",
            "llama@q4",
            "--machines",
            "n1",
            "--operations",
            "inference,inference:manage",
            "--lifetime",
            "1h",
            "--max-concurrent",
            "4",
            "--max-requests",
            "100",
            "--stop-on-revoke",
        ])
        .unwrap();
        let FederationCommand::Approve { request, grant, .. } = command else {
            panic!("not approve");
        };
        assert_eq!(request, "req_1");
        let sent = serde_json::to_value(spec(None, grant)).unwrap();
        assert_eq!(
            sent,
            serde_json::json!({
                "operations": ["inference", "inference:manage"],
                "services": ["chat", "embed"],
                "models": ["llama@q4"],
                "machines": ["n1"],
                "lifetime_s": 3600,
                "max_concurrent": 4,
                "max_requests": 100,
                "max_model_bytes": 0,
                "stop_on_revoke": true,
            })
        );
    }

    #[test]
    fn bad_operations_models_and_lifetimes_are_refused_before_sending() {
        let base = [
            "share",
            "--peer",
            "east",
            "--max-concurrent",
            "1",
            "--max-requests",
            "1",
        ];
        let with = |extra: &[&str]| parse(&base.iter().chain(extra).copied().collect::<Vec<_>>());
        assert!(with(&["--operations", "inference", "--lifetime", "30m"]).is_ok());
        assert!(with(&["--operations", "admin", "--lifetime", "30m"]).is_err());
        assert!(with(&["--operations", "inference", "--lifetime", "0"]).is_err());
        assert!(with(&["--operations", "inference", "--lifetime", "400d"]).is_err());
        assert!(with(&["--operations", "inference", "--lifetime", "1w"]).is_err());
        assert!(
            with(&[
                "--operations",
                "inference",
                "--lifetime",
                "60",
                "--models",
                "llama"
            ])
            .is_err()
        );
        assert!(
            with(&["--lifetime", "60"]).is_err(),
            "operations are required"
        );
    }

    #[test]
    fn expiry_reads_as_time_left() {
        assert_eq!(expires(1_000, 2_000), "expired");
        assert_eq!(expires(61_000 + 3_600_000, 1_000), "in 1h 1m");
        assert_eq!(expires(30_000, 0), "in 30s");
        assert_eq!(expires(2 * 86_400_000 + 3 * 3_600_000, 0), "in 2d 3h");
    }
}
