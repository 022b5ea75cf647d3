//! `switchyard federation evaluator show|set|rollback`: the cluster's grant
//! evaluator, with generations as `switchyard admission` has them: `set`
//! and `rollback` each make a new generation, which every replica follows;
//! `show` says which one is in force, the history, and each replica's
//! generation and status.

use std::process::ExitCode;

use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};
use switchyard_protocol::admin::{Rollback, SetEvaluator};
use switchyard_protocol::generations::{EvaluatorStatus, Generation};

use super::carrier::{row, table};
use super::federation::print_json;
use crate::cli::federation::{EvaluatorAction, Output};
use crate::client::Client;

/// Runs an `evaluator` command.
pub async fn evaluator(action: EvaluatorAction, out: Output) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let shows = matches!(action, EvaluatorAction::Show);
    let body = match action {
        EvaluatorAction::Show => {
            client
                .send(client.request(Method::GET, "/api/federation/evaluator"))
                .await?
        }
        EvaluatorAction::Set {
            plugin,
            version,
            settings,
        } => {
            let settings = match settings {
                Some(text) => settings_document(&text)?,
                None => json!({}),
            };
            let body = SetEvaluator {
                plugin,
                version,
                settings,
            };
            client
                .send_json(Method::PUT, "/api/federation/evaluator", &body)
                .await?
        }
        EvaluatorAction::Rollback { generation } => {
            client
                .send_json(
                    Method::POST,
                    "/api/federation/evaluator/rollback",
                    &Rollback { generation },
                )
                .await?
        }
    };
    if out.json {
        return print_json(&body);
    }
    match shows {
        true => print!("{}", render_show(&read::<EvaluatorStatus>(&body)?)),
        false => print!("{}", render_generation(&read::<Generation>(&body)?)),
    }
    Ok(ExitCode::SUCCESS)
}

/// An answer read as the `host/protocol` type it is.
fn read<T: serde::de::DeserializeOwned>(body: &Value) -> anyhow::Result<T> {
    serde_json::from_value(body.clone())
        .with_context(|| format!("an answer that is not a {}", std::any::type_name::<T>()))
}

/// `--settings`: a JSON document, or `@FILE` holding one. Checked to be
/// JSON here; what it means is the plugin's to judge, on the server.
pub fn settings_document(text: &str) -> anyhow::Result<Value> {
    match text.strip_prefix('@') {
        Some(path) => {
            let file = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
            serde_json::from_str(&file).with_context(|| format!("{path} is not JSON"))
        }
        None => serde_json::from_str(text)
            .with_context(|| "--settings is not JSON (give a document, or @FILE)"),
    }
}

/// A value, `-` when absent or empty.
fn or_dash(value: Option<&str>) -> String {
    match value {
        Some(text) if !text.is_empty() => text.to_string(),
        _ => "-".into(),
    }
}

/// ` (rollback to 0)`: a note worth saying (every other is `set`).
fn note(note: &str) -> String {
    match note {
        "" | "set" => String::new(),
        other => format!(" ({other})"),
    }
}

/// The answer of `GET /api/federation/evaluator`: the generation in force,
/// the history, and each replica's generation and status.
pub fn render_show(status: &EvaluatorStatus) -> String {
    let current = &status.current;
    let mut out = format!(
        "generation:  {}{}\n",
        current.generation,
        note(&current.note)
    );
    out.push_str(&format!(
        "evaluator:   {} {}",
        current.plugin,
        or_dash(current.version.as_deref())
    ));
    if status.shipped {
        out.push_str(" (shipped with the binary)");
    }
    out.push('\n');
    if let Some(sha256) = &status.sha256 {
        out.push_str(&format!("sha256:      {sha256}\n"));
    }
    out.push_str(&format!("settings:    {}\n", status.settings));
    if !current.created_by.is_empty() {
        out.push_str(&format!(
            "made:        {} by {}\n",
            or_dash(current.created_at.as_deref()),
            current.created_by
        ));
    }
    if let Some(error) = &status.error {
        out.push_str(&format!("error:       {error}\n"));
    }

    out.push_str(&format!("\nhistory ({})\n", status.history.len()));
    if !status.history.is_empty() {
        let mut rows = vec![row(["GENERATION", "PLUGIN", "VERSION", "NOTE", "BY", "AT"])];
        for g in &status.history {
            rows.push(vec![
                g.generation.to_string(),
                g.plugin.clone(),
                or_dash(g.version.as_deref()),
                or_dash(Some(&g.note)),
                or_dash(Some(&g.created_by)),
                or_dash(g.created_at.as_deref()),
            ]);
        }
        out.push_str(&table(&rows));
    }

    out.push_str(&format!("\nreplicas ({})\n", status.replicas.len()));
    if !status.replicas.is_empty() {
        let mut rows = vec![row([
            "INSTANCE",
            "HOSTNAME",
            "GENERATION",
            "STATUS",
            "FAILED",
        ])];
        for r in &status.replicas {
            let failed = match (r.failed_generation, &r.error) {
                (None, None) => "-".to_string(),
                (g, e) => format!(
                    "generation {}: {}",
                    g.map_or("-".into(), |g| g.to_string()),
                    or_dash(e.as_deref())
                ),
            };
            rows.push(vec![
                r.instance.clone(),
                r.hostname.clone(),
                r.generation.to_string(),
                r.status.clone(),
                failed,
            ]);
        }
        out.push_str(&table(&rows));
    }
    out
}

/// A new generation (the answer of `set` and `rollback`): what it binds.
pub fn render_generation(generation: &Generation) -> String {
    let entry = generation.policies.first();
    let what = match entry {
        None => "the shipped grant-standard".to_string(),
        Some(entry) => format!("{} {}", entry.plugin, entry.version),
    };
    let mut out = format!(
        "grant evaluator generation {}: {what}{}\n",
        generation.generation,
        note(&generation.note)
    );
    if let Some(entry) = entry {
        out.push_str(&format!("sha256:      {}\n", entry.sha256));
        out.push_str(&format!("settings:    {}\n", entry.settings));
    }
    out.push_str(
        "every replica loads it within seconds; `switchyard federation evaluator show` \
         shows each one's generation\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_a_document_or_a_file() {
        assert_eq!(
            settings_document(r#"{"deny_peers":["x"]}"#).unwrap(),
            json!({"deny_peers": ["x"]})
        );
        let file = std::env::temp_dir().join(format!(
            "switchyard-evaluator-settings-{}.json",
            std::process::id()
        ));
        std::fs::write(&file, r#"{"max_tokens_per_call": 5}"#).unwrap();
        let read = settings_document(&format!("@{}", file.display()));
        std::fs::remove_file(&file).unwrap();
        assert_eq!(read.unwrap(), json!({"max_tokens_per_call": 5}));
        assert!(settings_document("{not json").is_err());
        assert!(settings_document("@/nonexistent/settings.json").is_err());
    }

    #[test]
    fn show_says_the_generation_history_and_replicas() {
        let body = json!({
            "generation": 2, "plugin": "grant-standard", "version": "0.1.0",
            "sha256": "ab", "settings": {}, "shipped": true, "note": "rollback to 0",
            "created_by": "k1", "created_at": "T2",
            "history": [
                {"generation": 2, "plugin": "grant-standard", "version": null,
                 "note": "rollback to 0", "created_by": "k1", "created_at": "T2"},
                {"generation": 1, "plugin": "grant-standard", "version": "0.1.0",
                 "note": "set", "created_by": "k1", "created_at": "T1"}
            ],
            "replicas": [
                {"instance": "i1", "hostname": "h1", "generation": 2, "status": "current"},
                {"instance": "i2", "hostname": "h2", "generation": 1, "status": "failed",
                 "failed_generation": 2, "error": "boom"}
            ]
        });
        let text = render_show(&serde_json::from_value(body).unwrap());
        assert!(
            text.starts_with(
                "generation:  2 (rollback to 0)\nevaluator:   grant-standard 0.1.0 (shipped with the binary)\n"
            ),
            "{text}"
        );
        assert!(text.contains("made:        T2 by k1\n"), "{text}");
        assert!(text.contains("history (2)\n"), "{text}");
        let line = text.lines().find(|l| l.contains("i2")).unwrap();
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>(),
            ["i2", "h2", "1", "failed", "generation", "2:", "boom"]
        );
    }

    #[test]
    fn a_generation_names_what_it_binds() {
        let generation = |body: Value| -> Generation { serde_json::from_value(body).unwrap() };
        let set = generation(
            json!({"point": "grant-evaluator", "generation": 1, "note": "set",
            "created_by": "k1", "created_at": "T1", "policies": [
            {"plugin": "grant-standard", "version": "0.1.0", "sha256": "ab",
             "settings": {"deny_peers": ["x"]}, "mode": "enforce", "fail": "closed"}]}),
        );
        let text = render_generation(&set);
        assert!(
            text.starts_with("grant evaluator generation 1: grant-standard 0.1.0\n"),
            "{text}"
        );
        assert!(
            text.contains(r#"settings:    {"deny_peers":["x"]}"#),
            "{text}"
        );
        let back = generation(json!({"point": "grant-evaluator", "generation": 2,
            "note": "rollback to 0", "created_by": "k1", "created_at": "T2", "policies": []}));
        assert!(
            render_generation(&back).starts_with(
                "grant evaluator generation 2: the shipped grant-standard (rollback to 0)\n"
            ),
            "{}",
            render_generation(&back)
        );
    }
}
