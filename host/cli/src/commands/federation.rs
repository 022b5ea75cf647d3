//! `switchyard federation ...`: this cluster's key, identity and join
//! token, joining, peers, offers and status. Pairing (requests, grants)
//! is in `federation_grants`, managed services and operations in
//! `federation_services`, the grant evaluator in `federation_evaluator`.
//!
//! Each command is one or two calls to `/api/federation/`; `--json` prints
//! the API's JSON as it is, and a refusal prints the API's code and
//! message (`error: 503 Service Unavailable NODE_UNAVAILABLE: ...`, exit 2)
//! as every admin command does.

use std::process::ExitCode;

use anyhow::bail;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::Value;
use switchyard_federation::identity::{ClusterKey, default_key_path};
use switchyard_protocol::federation::{
    FederationStatus, Identity, JoinPeer, JoinToken, MAX_GRANTS, MAX_OFFERS, MAX_OPERATIONS,
    MAX_PEERS, NewJoinToken, NewOffer, Offer, Peer, PeerStatus, Resource,
};
use switchyard_protocol::jobs::Eligibility;

use super::carrier::{list_or_dash, row, table};
use super::{
    federation_copies, federation_evaluator, federation_grants, federation_jobs,
    federation_services,
};
use crate::cli::federation::{
    FederationCommand, KeyFileCommand, OffersAction, Output, PeersAction, PublishArgs,
};
use crate::client::{Client, api_error};

/// Runs a `federation` command.
pub async fn federation(command: FederationCommand) -> anyhow::Result<ExitCode> {
    match command {
        FederationCommand::Key(KeyFileCommand::Init {
            file,
            data_dir,
            json,
        }) => key_init(file.unwrap_or_else(|| default_key_path(&data_dir)), json),
        FederationCommand::Identity { adopt: false, out } => identity(out).await,
        FederationCommand::Identity { adopt: true, out } => adopt(out).await,
        FederationCommand::Token {
            rotate,
            ttl_s,
            uses,
            out,
        } => token(rotate, NewJoinToken { ttl_s, uses }, out).await,
        FederationCommand::Join {
            url,
            join_token,
            label,
            out,
        } => {
            join(
                JoinPeer {
                    url,
                    join_token,
                    label,
                },
                out.into(),
            )
            .await
        }
        FederationCommand::Peers { action, out } => peers(action, out).await,
        FederationCommand::Offers { action, out } => offers(action, out).await,
        FederationCommand::Status(out) => status(out).await,
        FederationCommand::Requests { discard, out } => {
            federation_grants::requests(discard, out).await
        }
        FederationCommand::Request {
            peer,
            operations,
            note,
            out,
        } => federation_grants::request(peer, operations, note, out).await,
        FederationCommand::Approve {
            request,
            grant,
            out,
        } => federation_grants::approve(request, grant, out).await,
        FederationCommand::Share { peer, grant, out } => {
            federation_grants::share(peer, grant, out).await
        }
        FederationCommand::Grants { action, out } => federation_grants::grants(action, out).await,
        FederationCommand::Complete { id, out } => federation_grants::complete(id, out).await,
        FederationCommand::Revoke { id, out } => federation_grants::revoke(id, out).await,
        FederationCommand::Services { action, out } => {
            federation_services::services(action, out).await
        }
        FederationCommand::Evaluator { action, out } => {
            federation_evaluator::evaluator(action, out).await
        }
        FederationCommand::Operations { peer, id, out } => {
            federation_services::operation(peer, id, out).await
        }
        FederationCommand::Copy { action, start, out } => {
            federation_copies::copy(action, start, out).await
        }
        FederationCommand::Model {
            peer,
            model,
            revision,
            out,
        } => federation_copies::model(peer, model, revision, out).await,
        FederationCommand::Maintenance { disable, change } => {
            let state = match disable {
                true => Eligibility::Eligible,
                false => Eligibility::Maintenance,
            };
            federation_jobs::eligibility(state, change, false).await
        }
        FederationCommand::Drain { wait, change } => {
            federation_jobs::eligibility(Eligibility::Draining, change, wait).await
        }
        FederationCommand::Undrain { change } => {
            federation_jobs::eligibility(Eligibility::Eligible, change, false).await
        }
    }
}

/// Writes a new key file and prints where, and the public key. The secret
/// is never printed: the file is the only copy.
fn key_init(path: std::path::PathBuf, json: bool) -> anyhow::Result<ExitCode> {
    let key = ClusterKey::init_file(&path)?;
    if json {
        let body = serde_json::json!({"path": path, "public_key": key.public_key()});
        println!("{}", serde_json::to_string_pretty(&body)?);
    } else {
        println!("wrote {} (mode 0600)", path.display());
        println!("public key: {}", key.public_key());
        println!("give this file to every replica of the cluster: serve --federation-key FILE");
    }
    Ok(ExitCode::SUCCESS)
}

async fn identity(out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let body = client
        .send(client.request(Method::GET, "/api/federation/identity"))
        .await?;
    if out.json {
        return print_json(&body);
    }
    let identity: Identity = serde_json::from_value(body)?;
    print!("{}", render_identity(&identity));
    Ok(ExitCode::SUCCESS)
}

/// What `identity --adopt` warns: peers paired with the old key refuse
/// the new one, and nothing pairs them again but the operators.
pub const ADOPT_WARNING: &str = "warning: every peer paired with the old key refuses this one: \
     forget each peer and join it again, on both sides \
     (`switchyard federation peers forget PEER`, then `federation join`)";

/// Makes this replica's key file the cluster's key and prints the new
/// public key with the warning (on stderr with `--json`, so stdout stays
/// one JSON document).
async fn adopt(out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let body = client
        .send(client.request(Method::POST, "/api/federation/identity/adopt"))
        .await?;
    if out.json {
        eprintln!("{ADOPT_WARNING}");
        return print_json(&body);
    }
    let identity: Identity = typed(body)?;
    println!("adopted this replica's key file as the cluster's key");
    print!("{}", render_identity(&identity));
    println!("{ADOPT_WARNING}");
    Ok(ExitCode::SUCCESS)
}

/// `cluster id`, `label` and `public key`, one a line.
pub fn render_identity(identity: &Identity) -> String {
    let key = identity
        .public_key
        .clone()
        .unwrap_or_else(|| "- (no key configured)".into());
    format!(
        "cluster id:  {}\nlabel:       {}\npublic key:  {key}\n",
        identity.cluster_id, identity.label
    )
}

/// Rotates the join token and prints it with the exact join command. The
/// label is read first: once the token is rotated the old one is gone, so
/// nothing that can fail comes between making the new one and printing it.
async fn token(rotate: bool, spec: NewJoinToken, out: Output) -> anyhow::Result<ExitCode> {
    if !rotate {
        bail!(
            "a join token is kept only as a hash and shown once, when it is made: \
             pass --rotate to make a new one (the current one stops working)"
        );
    }
    let client = Client::new(&out.api);
    let identity: Identity = typed(
        client
            .send(client.request(Method::GET, "/api/federation/identity"))
            .await?,
    )?;
    let body = client
        .send(
            client
                .request(Method::POST, "/api/federation/join-token")
                .json(&spec),
        )
        .await?;
    if out.json {
        return print_json(&body);
    }
    let JoinToken { join_token, .. } = typed(body)?;
    print!(
        "{}",
        render_token(&join_token, &out.api.server, &identity.label)
    );
    Ok(ExitCode::SUCCESS)
}

/// The token and the command another cluster joins this one with.
pub fn render_token(token: &str, server: &str, label: &str) -> String {
    format!(
        "join token (shown once; the previous one no longer works): {token}\n\
         join this cluster from another:\n  \
         switchyard federation join --url {} --token {token} --label {label}\n",
        server.trim_end_matches('/')
    )
}

async fn join(request: JoinPeer, out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let (status, body) = client
        .answer(
            client
                .request(Method::POST, "/api/federation/peers")
                .json(&request),
        )
        .await?;
    if !status.is_success() {
        return Err(api_error(status, body));
    }
    if out.json {
        return print_json(&body);
    }
    let peer: Peer = typed(body)?;
    let what = if status == reqwest::StatusCode::CREATED {
        "joined"
    } else {
        "already joined (same identity, same URL): nothing changed"
    };
    println!("{what}");
    print!("{}", render_peer(&peer));
    Ok(ExitCode::SUCCESS)
}

async fn peers(action: Option<PeersAction>, out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    match action {
        None => {
            let body = client
                .send(client.request(Method::GET, "/api/federation/peers"))
                .await?;
            if out.json {
                return print_json(&body);
            }
            let peers: Vec<Peer> = typed(body["peers"].clone())?;
            print!("{}", render_peers(&peers));
        }
        Some(PeersAction::Show { peer }) => {
            let path = format!("/api/federation/peers/{}", segment(&peer));
            let body = client.send(client.request(Method::GET, &path)).await?;
            if out.json {
                return print_json(&body);
            }
            print!("{}", render_peer(&typed(body)?));
        }
        Some(PeersAction::Forget { peer }) => {
            let path = format!("/api/federation/peers/{}", segment(&peer));
            client.send(client.request(Method::DELETE, &path)).await?;
            println!(
                "forgot peer {peer}: its link, requests, grants and operation receipts are gone"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One peer, a field a line.
pub fn render_peer(peer: &Peer) -> String {
    let mut out = String::new();
    let mut field = |name: &str, value: &str| {
        out.push_str(&format!("{:<17}{value}\n", format!("{name}:")));
    };
    field("peer", &format!("{} ({})", peer.label, peer.id));
    field(
        "url",
        peer.url.as_deref().unwrap_or("- (it dials this cluster)"),
    );
    field("cluster id", &peer.cluster_id);
    field("public key", &peer.public_key);
    field("link", &link(&peer.link));
    field(
        "last verified",
        peer.last_verified_at.as_deref().unwrap_or("-"),
    );
    out
}

/// The peers as a table.
pub fn render_peers(peers: &[Peer]) -> String {
    let mut rows = vec![row(["LABEL", "ID", "URL", "LINK", "LAST ERROR"])];
    for p in peers {
        rows.push(vec![
            p.label.clone(),
            p.id.clone(),
            p.url.clone().unwrap_or_else(|| "-".into()),
            p.link.state.as_str().to_string(),
            p.link.last_error.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    format!("peers ({}/{MAX_PEERS})\n{}", peers.len(), table(&rows))
}

/// `up since T`, `down since T: why`.
fn link(link: &switchyard_protocol::federation::LinkStatus) -> String {
    let mut text = link.state.as_str().to_string();
    if let Some(since) = &link.since {
        text.push_str(&format!(" since {since}"));
    }
    if let Some(why) = &link.last_error {
        text.push_str(&format!(": {why}"));
    }
    text
}

async fn offers(action: Option<OffersAction>, out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    match action {
        None => {
            let body = client
                .send(client.request(Method::GET, "/api/federation/offers"))
                .await?;
            if out.json {
                return print_json(&body);
            }
            let offers: Vec<Offer> = typed(body["offers"].clone())?;
            print!("{}", render_offers(&offers));
        }
        Some(OffersAction::Publish(args)) => {
            let offer = new_offer(args)?;
            let body = client
                .send_json(Method::POST, "/api/federation/offers", &offer)
                .await?;
            if out.json {
                return print_json(&body);
            }
            let offer: Offer = typed(body)?;
            println!(
                "published {} offer {}: {}",
                offer.resource.kind(),
                offer.id,
                resource(&offer.resource)
            );
        }
        Some(OffersAction::Withdraw { id }) => {
            let path = format!("/api/federation/offers/{}", segment(&id));
            client.send(client.request(Method::DELETE, &path)).await?;
            println!("withdrew offer {id}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The offer `publish` sends; clap has checked that exactly one resource
/// is named (and `--revision` with `--model`).
pub fn new_offer(args: PublishArgs) -> anyhow::Result<NewOffer> {
    if args.gpus.is_some() && args.runtime.is_none() {
        bail!("--gpus goes with --runtime");
    }
    let resource = match (args.deployment, args.model, args.machine, args.runtime) {
        (Some(deployment), ..) => Resource::Service { deployment },
        (_, Some(model), ..) => Resource::Model {
            model,
            revision: args.revision.unwrap_or_default(),
        },
        (_, _, Some(node), _) => Resource::Machine { node },
        (_, _, _, engine) => Resource::Runtime {
            engine: engine.unwrap_or_default(),
            gpus_per_replica: args.gpus.unwrap_or(0),
        },
    };
    Ok(NewOffer {
        id: args.id,
        resource,
    })
}

/// `deployment dep_1`, `model llama@q4`, `machine node-1`, `runtime vllm, 2 GPUs`.
fn resource(resource: &Resource) -> String {
    match resource {
        Resource::Service { deployment } => format!("deployment {deployment}"),
        Resource::Model { model, revision } => format!("model {model}@{revision}"),
        Resource::Machine { node } => format!("machine {node}"),
        Resource::Runtime {
            engine,
            gpus_per_replica,
        } => format!("runtime {engine}, {gpus_per_replica} GPUs a replica"),
    }
}

/// The offers as a table.
pub fn render_offers(offers: &[Offer]) -> String {
    let mut rows = vec![row(["ID", "KIND", "RESOURCE", "PUBLISHED"])];
    for o in offers {
        rows.push(vec![
            o.id.clone(),
            o.resource.kind().as_str().to_string(),
            resource(&o.resource),
            o.created_at.clone(),
        ]);
    }
    format!("offers ({}/{MAX_OFFERS})\n{}", offers.len(), table(&rows))
}

async fn status(out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let body = client
        .send(client.request(Method::GET, "/api/federation/status"))
        .await?;
    if out.json {
        return print_json(&body);
    }
    print!("{}", render_status(&typed(body)?));
    Ok(ExitCode::SUCCESS)
}

/// The status: the identity, each peer with its link and grants, the bounds.
pub fn render_status(status: &FederationStatus) -> String {
    let mut out = format!("identity:    {}\n", status.identity);
    if let Some(why) = &status.suspended {
        out.push_str(&format!("suspended:   {why}\n"));
    }
    out.push_str(&format!(
        "cluster:     {} ({})\npublic key:  {}\n",
        status.cluster.label,
        status.cluster.cluster_id,
        status.cluster.public_key.as_deref().unwrap_or("-")
    ));
    let b = &status.bounds;
    out.push_str(&format!(
        "bounds:      peers {}/{MAX_PEERS}, offers {}/{MAX_OFFERS}, grants {}/{MAX_GRANTS}, \
         operations {}/{MAX_OPERATIONS}\n",
        b.peers, b.offers, b.grants, b.operations
    ));
    out.push_str(&format!("\npeers ({})\n", status.peers.len()));
    for peer in &status.peers {
        out.push_str(&render_peer_status(peer));
    }
    if !status.copies.is_empty() {
        out.push_str(&format!(
            "\nincomplete model copies ({})\n{}",
            status.copies.len(),
            federation_copies::render_copies(&status.copies)
        ));
    }
    out
}

/// One peer of the status: a line, then its grants as a table.
fn render_peer_status(peer: &PeerStatus) -> String {
    let verified = match (peer.identity_verified, &peer.last_verified_at) {
        (true, Some(at)) => format!("identity verified (last {at})"),
        (true, None) => "identity verified".into(),
        (false, Some(at)) => format!("identity not verified since start (last {at})"),
        (false, None) => "identity not verified".into(),
    };
    let mut out = format!(
        "  {} ({}): link {}; {verified}\n",
        peer.label,
        peer.id,
        link(&peer.link)
    );
    let jobs = &peer.jobs;
    if jobs.jobs > 0 {
        out.push_str(&format!(
            "    jobs it owns for this cluster: {} ({} running{})\n",
            jobs.jobs,
            jobs.active,
            jobs.oldest_sync
                .as_ref()
                .map(|at| format!(", oldest sync {at}"))
                .unwrap_or_default()
        ));
    }
    if peer.grants.is_empty() {
        out.push_str("    no grants\n");
        return out;
    }
    let mut rows = vec![row([
        "GRANT",
        "DIRECTION",
        "STATUS",
        "REQUESTS LEFT",
        "CONCURRENT LEFT",
        "MODEL BYTES LEFT",
        "EXHAUSTED",
    ])];
    for g in &peer.grants {
        rows.push(vec![
            g.id.clone(),
            g.direction.as_str().to_string(),
            g.status.to_string(),
            g.requests_left.to_string(),
            g.concurrent_left.to_string(),
            g.model_bytes_left.to_string(),
            list_or_dash(g.exhausted.iter().cloned()),
        ]);
    }
    for line in table(&rows).lines() {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

/// Prints the API's JSON, pretty.
pub fn print_json(value: &Value) -> anyhow::Result<ExitCode> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(ExitCode::SUCCESS)
}

/// The answer as its protocol type; a server that answers something else
/// is named in the error.
pub fn typed<T: DeserializeOwned>(body: Value) -> anyhow::Result<T> {
    serde_json::from_value(body)
        .map_err(|e| anyhow::anyhow!("the server's answer is not what this CLI expects: {e}"))
}

/// A path segment: ids and labels are plain, but what the operator typed
/// must not change the path (`/`, `?`, `%`).
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'@' | b':' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests;
