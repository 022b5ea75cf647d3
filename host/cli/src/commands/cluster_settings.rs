//! `switchyard cluster settings show|set`: `GET/PUT /api/cluster/settings`.

use std::process::ExitCode;

use anyhow::bail;
use reqwest::Method;
use serde_json::{Map, Value};
use switchyard_protocol::carrier::ClusterSettings;
use switchyard_protocol::signing::RequireSigned;

use crate::cli::SettingsCommand;
use crate::client::Client;

const PATH: &str = "/api/cluster/settings";

pub async fn settings(command: SettingsCommand) -> anyhow::Result<ExitCode> {
    let (body, json) = match command {
        SettingsCommand::Show { json, api } => {
            let client = Client::new(&api);
            (client.send(client.request(Method::GET, PATH)).await?, json)
        }
        SettingsCommand::Set { pairs, api } => {
            let client = Client::new(&api);
            let patch = patch(pairs)?;
            (client.send_json(Method::PUT, PATH, &patch).await?, false)
        }
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&body)?);
    } else {
        print!("{}", render(&serde_json::from_value(body)?));
    }
    Ok(ExitCode::SUCCESS)
}

/// The pairs as one partial object; a key given twice is a mistake.
fn patch(pairs: Vec<(String, Value)>) -> anyhow::Result<Map<String, Value>> {
    let mut patch = Map::new();
    for (key, value) in pairs {
        if patch.insert(key.clone(), value).is_some() {
            bail!("'{key}' is given twice");
        }
    }
    Ok(patch)
}

/// One line per setting, in the protocol's order: `window_ms           30000`.
pub fn render(settings: &ClusterSettings) -> String {
    let url = |u: &Option<String>| u.clone().unwrap_or_else(|| "-".into());
    let values = [
        url(&settings.nats_url),
        url(&settings.worker_nats_url),
        settings.prepare_timeout_ms.to_string(),
        settings.window_ms.to_string(),
        settings.max_drain_ms.to_string(),
        settings.attach_jitter_ms.to_string(),
        required_kinds(&settings.require_signed),
    ];
    ClusterSettings::NAMES
        .iter()
        .zip(values)
        .map(|(name, value)| format!("{name:<20}{value}\n"))
        .collect()
}

/// The kinds that must be signed, `policy, carrier`, or `-` for none.
fn required_kinds(required: &RequireSigned) -> String {
    let flags = [required.policy, required.grant, required.carrier];
    let kinds: Vec<&str> = RequireSigned::NAMES
        .iter()
        .zip(flags)
        .filter_map(|(name, on)| on.then_some(*name))
        .collect();
    match kinds.is_empty() {
        true => "-".into(),
        false => kinds.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use serde_json::json;

    use super::*;
    use crate::cli::{Cli, ClusterCommand, Command};

    fn pairs(args: &[&str]) -> Vec<(String, Value)> {
        let cli = Cli::try_parse_from(
            ["switchyard", "cluster", "settings", "set"]
                .iter()
                .chain(args),
        )
        .unwrap();
        let Command::Cluster(ClusterCommand::Settings(SettingsCommand::Set { pairs, .. })) =
            cli.command
        else {
            panic!("not a settings set");
        };
        pairs
    }

    #[test]
    fn set_sends_numbers_as_numbers_null_as_null_and_urls_as_text() {
        let sent = patch(pairs(&[
            "window_ms=10000",
            "nats_url=nats://10.0.0.5:4222",
            "worker_nats_url=null",
            "attach_jitter_ms=0",
            r#"require_signed={"policy":true}"#,
        ]))
        .unwrap();
        assert_eq!(
            Value::Object(sent),
            json!({"window_ms": 10000, "nats_url": "nats://10.0.0.5:4222",
                "worker_nats_url": null, "attach_jitter_ms": 0,
                "require_signed": {"policy": true}})
        );
        // A quoted value is text; a key given twice, no `=`, or none at all is refused.
        assert_eq!(pairs(&["nats_url=\"null\""])[0].1, json!("null"));
        assert!(patch(pairs(&["window_ms=1", "window_ms=2"])).is_err());
        for bad in [&["window_ms"][..], &["=5"][..], &[][..]] {
            let args = ["switchyard", "cluster", "settings", "set"]
                .iter()
                .chain(bad);
            assert!(Cli::try_parse_from(args).is_err(), "{bad:?}");
        }
        assert!(Cli::try_parse_from(["switchyard", "cluster", "settings", "show"]).is_ok());
    }

    #[test]
    fn show_prints_one_line_per_setting() {
        let settings = ClusterSettings {
            nats_url: Some("nats://user:***@10.0.0.5:4222".into()),
            ..ClusterSettings::default()
        };
        assert_eq!(
            render(&settings),
            "\
nats_url            nats://user:***@10.0.0.5:4222
worker_nats_url     -
prepare_timeout_ms  60000
window_ms           30000
max_drain_ms        120000
attach_jitter_ms    10000
require_signed      -
"
        );
        let strict = ClusterSettings {
            require_signed: RequireSigned {
                policy: true,
                grant: false,
                carrier: true,
            },
            ..ClusterSettings::default()
        };
        assert!(render(&strict).ends_with("require_signed      policy, carrier\n"));
    }
}
