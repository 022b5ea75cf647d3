//! `switchyard trust keygen|add|list|remove`: a signing key made offline,
//! and the cluster's trusted keys (`/api/trust/keys`).

use std::process::ExitCode;

use reqwest::Method;
use switchyard_protocol::signing::{NewTrustedKey, TrustedKey};
use switchyard_signing::SigningKey;
use switchyard_signing::key::{public_path, read_public_file};

use crate::cli::TrustCommand;
use crate::client::Client;

const PATH: &str = "/api/trust/keys";

pub async fn trust(command: TrustCommand) -> anyhow::Result<ExitCode> {
    match command {
        TrustCommand::Keygen { out } => {
            let key = SigningKey::generate_files(&out)?;
            // The private key is named, never shown.
            println!(
                "key {}: private key {} (mode 0600, keep it secret), public key {}",
                key.key_id(),
                out.display(),
                public_path(&out).display()
            );
        }
        TrustCommand::Add {
            public_key,
            name,
            comment,
            api,
        } => {
            let new = NewTrustedKey {
                public_key: read_public_file(&public_key)?,
                name,
                comment,
            };
            let client = Client::new(&api);
            let key: TrustedKey =
                serde_json::from_value(client.send_json(Method::POST, PATH, &new).await?)?;
            println!("trusted {} ({})", key.id, key.name);
        }
        TrustCommand::List { json, api } => {
            let client = Client::new(&api);
            let body = client.send(client.request(Method::GET, PATH)).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&body)?);
            } else {
                let keys: Vec<TrustedKey> = serde_json::from_value(body["keys"].clone())?;
                print!("{}", render(&keys));
            }
        }
        TrustCommand::Remove { id, api } => {
            let client = Client::new(&api);
            let path = format!("{PATH}/{id}");
            let key: TrustedKey =
                serde_json::from_value(client.send(client.request(Method::DELETE, &path)).await?)?;
            println!(
                "{} ({}) is no longer trusted; running plugins it signed keep running",
                key.id, key.name
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One line per key: id, name, who added it and when, the comment.
fn render(keys: &[TrustedKey]) -> String {
    if keys.is_empty() {
        return "no trusted keys\n".into();
    }
    keys.iter()
        .map(|k| {
            format!(
                "{:<18}{:<24}{:<26}{}{}\n",
                k.id,
                k.name,
                k.added_at,
                k.added_by,
                k.comment
                    .as_deref()
                    .map(|c| format!("  # {c}"))
                    .unwrap_or_default()
            )
        })
        .collect()
}
