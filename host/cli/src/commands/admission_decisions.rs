//! `switchyard admission decisions POINT`: the decision log as a table
//! (or the API's JSON), with the counts that make monitor mode readable:
//! bind a policy in monitor mode, read what it would have denied, enforce.

use std::process::ExitCode;

use clap::Args;
use reqwest::Method;
use switchyard_protocol::decisions::{AdmissionDecision, DecisionLog};

use super::carrier::{row, table};
use crate::cli::ApiArgs;
use crate::client::Client;

/// `admission decisions`' arguments.
#[derive(Debug, Args)]
pub struct DecisionsArgs {
    /// The point.
    pub point: String,
    /// A record id (the records after it) or an RFC 3339 time (the records
    /// at or after it) [default: the newest records].
    #[arg(long)]
    pub since: Option<String>,
    /// Only records with this deny code or error kind.
    #[arg(long)]
    pub code: Option<String>,
    /// Only records of this plugin: name or name@version.
    #[arg(long)]
    pub plugin: Option<String>,
    /// Records to show, 1 to 1000 [default: 100].
    #[arg(long)]
    pub limit: Option<u32>,
    /// Print the API's JSON answer.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Asks for a page of the log and prints it.
pub async fn run(args: DecisionsArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args.api);
    let mut query: Vec<(&str, String)> = Vec::new();
    for (name, value) in [
        ("since", args.since),
        ("code", args.code),
        ("plugin", args.plugin),
        ("limit", args.limit.map(|n| n.to_string())),
    ] {
        if let Some(value) = value {
            query.push((name, value));
        }
    }
    let path = format!("/api/admission/{}/decisions", args.point);
    let answer = client
        .send(client.request(Method::GET, &path).query(&query))
        .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(ExitCode::SUCCESS);
    }
    let log: DecisionLog = serde_json::from_value(answer)?;
    print!("{}", render(&log));
    Ok(ExitCode::SUCCESS)
}

fn render(log: &DecisionLog) -> String {
    let mut rows = vec![row([
        "ID", "AT", "GEN", "PLUGIN", "MODE", "DECISION", "CODE", "KEY", "REQUEST",
    ])];
    rows.extend(log.decisions.iter().map(line));
    let c = &log.counts;
    let mut out = table(&rows);
    out.push_str(&format!(
        "\n  deny {}  throttle {}  patch {}  flag {}  error {}  monitor {}  allow (sampled) {}\n",
        c.deny, c.throttle, c.patch, c.flag, c.error, c.monitor, c.allow
    ));
    if let Some(next) = log.next_since {
        out.push_str(&format!("  newer records: --since {next}\n"));
    }
    out
}

fn line(d: &AdmissionDecision) -> Vec<String> {
    let decision = match d.monitor {
        true => format!("{} (monitor)", d.decision),
        false => d.decision.to_string(),
    };
    vec![
        d.id.to_string(),
        d.at.clone(),
        d.generation.to_string(),
        format!("{}@{}", d.plugin, d.version),
        d.mode.to_string(),
        decision,
        d.code.clone().unwrap_or_else(|| "-".into()),
        d.key_id.clone(),
        // Enough of the digest to tell records apart in a table.
        d.request_sha256.chars().take(12).collect(),
    ]
}

#[cfg(test)]
mod tests {
    use switchyard_protocol::decisions::{DecisionCounts, RecordedDecision};
    use switchyard_protocol::plugin::Mode;

    use super::*;

    #[test]
    fn a_monitor_hit_reads_as_what_it_would_have_done() {
        let log = DecisionLog {
            decisions: vec![AdmissionDecision {
                id: 3,
                at: "2026-12-01T10:00:00.000Z".into(),
                point: "inference".into(),
                generation: 2,
                plugin: "max-tokens".into(),
                version: "1.0.0".into(),
                mode: Mode::Monitor,
                decision: RecordedDecision::Deny,
                code: Some("max_tokens_exceeded".into()),
                monitor: true,
                key_id: "key_1".into(),
                request_sha256: "0123456789abcdef".repeat(4),
                request: None,
                replica: "inst_1".into(),
            }],
            counts: DecisionCounts {
                monitor: 1,
                ..Default::default()
            },
            next_since: Some(3),
        };
        let text = render(&log);
        assert!(text.contains("max-tokens@1.0.0"), "{text}");
        assert!(text.contains("deny (monitor)"), "{text}");
        assert!(text.contains(" 0123456789ab\n"), "{text}");
        assert!(text.contains("monitor 1"), "{text}");
        assert!(text.contains("--since 3"), "{text}");
    }
}
