//! `switchyard team ...` and `switchyard audit ...`.

use std::process::ExitCode;

use reqwest::Method;
use switchyard_protocol::audit::{AuditLog, AuditVerification};
use switchyard_protocol::teams::{NewTeam, Team, Teams};

use crate::cli::ApiArgs;
use crate::cli::accounts::{AuditCommand, TeamCommand};
use crate::client::Client;

pub async fn team(command: TeamCommand) -> anyhow::Result<ExitCode> {
    match command {
        TeamCommand::Create { name, api } => {
            let client = Client::new(&api);
            let team: Team = client
                .send_as(
                    client
                        .request(Method::POST, "/api/teams")
                        .json(&NewTeam { name }),
                )
                .await?;
            println!("created team {}", team.name);
        }
        TeamCommand::List { api } => {
            let client = Client::new(&api);
            let teams: Teams = client
                .send_as(client.request(Method::GET, "/api/teams"))
                .await?;
            println!("{:<32} {:>9}  CREATED", "TEAM", "LIVE KEYS");
            for team in teams.teams {
                println!("{:<32} {:>9}  {}", team.name, team.keys, team.created_at);
            }
        }
        TeamCommand::Delete { name, api } => {
            let client = Client::new(&api);
            let path = format!("/api/teams/{name}");
            client.send(client.request(Method::DELETE, &path)).await?;
            println!("deleted team {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn audit(command: AuditCommand) -> anyhow::Result<ExitCode> {
    match command {
        AuditCommand::List {
            since,
            actor,
            object,
            limit,
            json,
            api,
        } => {
            let client = Client::new(&api);
            let mut query: Vec<(&str, String)> = Vec::new();
            query.extend(since.map(|v| ("since", v)));
            query.extend(actor.map(|v| ("actor", v)));
            query.extend(object.map(|v| ("object", v)));
            query.extend(limit.map(|v| ("limit", v.to_string())));
            let request = client.request(Method::GET, "/api/audit").query(&query);
            let log: AuditLog = client.send_as(request).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&log)?);
                return Ok(ExitCode::SUCCESS);
            }
            for r in &log.records {
                println!(
                    "{:>6} {} {} ({}) from {} {} {} {} -> {}  {}",
                    r.seq,
                    r.at,
                    r.actor,
                    r.actor_name,
                    r.remote.as_deref().unwrap_or("-"),
                    r.method,
                    r.route,
                    r.object.as_deref().unwrap_or("-"),
                    r.status,
                    r.summary
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Verify { api } => verify(api).await,
    }
}

async fn verify(api: ApiArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&api);
    let verified: AuditVerification = client
        .send_as(client.request(Method::GET, "/api/audit/verify"))
        .await?;
    let span = match (verified.first_seq, verified.last_seq) {
        (Some(first), Some(last)) => format!("records {first} to {last}"),
        _ => "no records".to_string(),
    };
    match verified.broken {
        None => {
            println!(
                "the audit chain holds: {} checked ({span})",
                verified.records
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(broken) => {
            println!(
                "the audit chain is broken at record {}: {} ({} checked, {span})",
                broken.seq, broken.reason, verified.records
            );
            Ok(ExitCode::FAILURE)
        }
    }
}
