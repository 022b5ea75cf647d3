//! `switchyard team ...` and `switchyard audit ...`.

use std::process::ExitCode;

use reqwest::Method;
use switchyard_protocol::audit::{AuditLog, AuditVerification};
use switchyard_protocol::teams::{NewTeam, Team, Teams};
use switchyard_protocol::usage::UsageReport;

use crate::cli::ApiArgs;
use crate::cli::accounts::{AuditCommand, TeamCommand, UsageArgs};
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

pub async fn usage(args: UsageArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args.api);
    let mut query = vec![
        ("group_by", args.group_by),
        ("granularity", args.granularity),
    ];
    query.extend(args.from.map(|v| ("from", v)));
    query.extend(args.to.map(|v| ("to", v)));
    let request = client.request(Method::GET, "/api/usage").query(&query);
    if args.csv {
        let response = request
            .header(reqwest::header::ACCEPT, "text/csv")
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() {
            let body = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
            return Err(crate::client::api_error(status, body));
        }
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let report: UsageReport = client.send_as(request).await?;
    let dims = report.group_by.join(", ");
    println!(
        "by {} per {}{}",
        if dims.is_empty() { "nothing" } else { &dims },
        report.granularity,
        if report.dropped > 0 {
            format!(" ({} events dropped on this replica)", report.dropped)
        } else {
            String::new()
        }
    );
    println!(
        "{:<22} {:<40} {:>9} {:>12} {:>12} {:>9}",
        "BUCKET", "GROUP", "REQUESTS", "PROMPT", "COMPLETION", "CACHED"
    );
    for row in &report.rows {
        let group: Vec<&str> = [&row.team, &row.key, &row.model, &row.peer, &row.node]
            .into_iter()
            .filter_map(|v| v.as_deref())
            .collect();
        println!(
            "{:<22} {:<40} {:>9} {:>12} {:>12} {:>9}",
            row.bucket,
            group.join(" / "),
            row.requests,
            row.prompt_tokens,
            row.completion_tokens,
            row.cached_tokens
        );
    }
    Ok(ExitCode::SUCCESS)
}
