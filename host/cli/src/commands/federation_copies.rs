//! `switchyard federation copy|model`: copying a model revision a peer
//! granted into this cluster's library, and inspecting its manifest.
//!
//! `copy PEER MODEL REVISION` starts the copy (or resumes the one not yet
//! complete) and then polls it twice a second, drawing its bytes held of
//! total, until it completes (exit 0) or stops, is interrupted or paused
//! (exit 1, with the code and message); `--detach` prints the record and
//! returns. The copy runs on the server either way: interrupting the CLI
//! does not stop it.

use std::process::ExitCode;
use std::time::Duration;

use reqwest::Method;
use switchyard_protocol::copies::{CopyRecord, CopyState, ModelManifest, NewCopy};

use super::carrier::{row, table};
use super::federation::{print_json, segment, typed};
use super::progress::{Progress, bar};
use crate::cli::federation::{CopyAction, CopyStart, Output};
use crate::client::Client;

/// How often a drawn copy is polled.
const POLL: Duration = Duration::from_millis(500);

/// `federation copy ...`.
pub async fn copy(
    action: Option<CopyAction>,
    start: CopyStart,
    out: Output,
) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let (method, path) = match action {
        None => return start_copy(&client, start, out.json).await,
        Some(CopyAction::List) => return list(&client, out.json).await,
        Some(CopyAction::Pause { id }) => (
            Method::POST,
            format!("/api/federation/copies/{}/pause", segment(&id)),
        ),
        Some(CopyAction::Resume { id }) => (
            Method::POST,
            format!("/api/federation/copies/{}/resume", segment(&id)),
        ),
        Some(CopyAction::Delete { id }) => {
            let path = format!("/api/federation/copies/{}", segment(&id));
            client.send(client.request(Method::DELETE, &path)).await?;
            println!("copy {id} deleted");
            return Ok(ExitCode::SUCCESS);
        }
    };
    let body = client.send(client.request(method, &path)).await?;
    if out.json {
        return print_json(&body);
    }
    let record: CopyRecord = typed(body)?;
    println!("{}", line(&record));
    Ok(ExitCode::SUCCESS)
}

async fn start_copy(client: &Client, start: CopyStart, json: bool) -> anyhow::Result<ExitCode> {
    let new = NewCopy {
        peer: start.peer.unwrap_or_default(),
        model: start.model.unwrap_or_default(),
        revision: start.revision.unwrap_or_default(),
    };
    let body = client
        .send_json(Method::POST, "/api/federation/copies", &new)
        .await?;
    if json && start.detach {
        return print_json(&body);
    }
    let mut record: CopyRecord = typed(body)?;
    if start.detach || record.id.is_empty() {
        println!("{}", line(&record));
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("copy {} ({})", record.id, record.state);
    let label = format!("{}@{}", record.model, record.revision);
    let mut progress = Progress::new(&label, record.bytes_total);
    let path = format!("/api/federation/copies/{}", segment(&record.id));
    while record.state.is_active() {
        progress.set(record.bytes_held);
        tokio::time::sleep(POLL).await;
        record = typed(client.send(client.request(Method::GET, &path)).await?)?;
    }
    progress.set(record.bytes_held);
    let outcome = match (&record.code, &record.message) {
        (Some(code), Some(message)) => format!("{}: {code}: {message}", record.state),
        (Some(code), None) => format!("{}: {code}", record.state),
        _ => record.state.to_string(),
    };
    progress.finish(&outcome);
    if json {
        print_json(&serde_json::to_value(&record)?)?;
    }
    Ok(match record.state {
        CopyState::Complete => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

async fn list(client: &Client, json: bool) -> anyhow::Result<ExitCode> {
    let body = client
        .send(client.request(Method::GET, "/api/federation/copies"))
        .await?;
    if json {
        return print_json(&body);
    }
    let copies: Vec<CopyRecord> = typed(body["copies"].clone())?;
    print!("copies ({})\n{}", copies.len(), render_copies(&copies));
    Ok(ExitCode::SUCCESS)
}

/// Copies as a table: id, peer, revision, state, bytes, why.
pub fn render_copies(copies: &[CopyRecord]) -> String {
    let mut rows = vec![row(["ID", "PEER", "MODEL", "STATE", "HELD", "WHY"])];
    for c in copies {
        rows.push(vec![
            c.id.clone(),
            c.peer.clone(),
            format!("{}@{}", c.model, c.revision),
            c.state.to_string(),
            bar(c.bytes_held, c.bytes_total),
            c.code.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    table(&rows)
}

/// One copy on a line.
fn line(c: &CopyRecord) -> String {
    let why = c
        .code
        .as_ref()
        .map(|code| format!(" ({code})"))
        .unwrap_or_default();
    let id = if c.id.is_empty() { "-" } else { &c.id };
    format!(
        "copy {id} {}@{} from {}: {}{why} {}",
        c.model,
        c.revision,
        c.peer,
        c.state,
        bar(c.bytes_held, c.bytes_total)
    )
}

/// `federation model PEER MODEL REVISION`.
pub async fn model(
    peer: String,
    model: String,
    revision: String,
    out: Output,
) -> anyhow::Result<ExitCode> {
    let client = Client::new(&out.api);
    let path = format!(
        "/api/federation/peers/{}/models/{}/{}",
        segment(&peer),
        segment(&model),
        segment(&revision)
    );
    let body = client.send(client.request(Method::GET, &path)).await?;
    if out.json {
        return print_json(&body);
    }
    let manifest: ModelManifest = typed(body)?;
    let mut rows = vec![row(["PATH", "SIZE", "SHA256"])];
    for f in &manifest.files {
        rows.push(vec![f.path.clone(), f.size.to_string(), f.sha256.clone()]);
    }
    print!(
        "{}@{} on {peer}: licence {}, {} bytes\n{}",
        manifest.id,
        manifest.revision,
        manifest.licence.as_deref().unwrap_or("-"),
        manifest.size(),
        table(&rows)
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::federation::FederationCommand;
    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> FederationCommand {
        let cli = Cli::try_parse_from(["switchyard", "federation"].iter().chain(args))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let Command::Federation(command) = cli.command else {
            panic!("not a federation command");
        };
        command
    }

    #[test]
    fn copy_takes_a_revision_or_a_subcommand() {
        let FederationCommand::Copy {
            action: None,
            start,
            ..
        } = parse(&["copy", "east", "llama", "q4", "--detach"])
        else {
            panic!("not a copy start");
        };
        assert_eq!(start.peer.as_deref(), Some("east"));
        assert_eq!(start.revision.as_deref(), Some("q4"));
        assert!(start.detach);
        let FederationCommand::Copy {
            action: Some(CopyAction::Pause { id }),
            ..
        } = parse(&["copy", "pause", "copy_1"])
        else {
            panic!("not a pause");
        };
        assert_eq!(id, "copy_1");
        assert!(matches!(
            parse(&["copy", "list", "--json"]),
            FederationCommand::Copy {
                action: Some(CopyAction::List),
                ..
            }
        ));
        assert!(
            Cli::try_parse_from(["switchyard", "federation", "copy", "east"]).is_err(),
            "a start names the peer, model and revision"
        );
    }

    #[test]
    fn a_stopped_copy_says_why() {
        let record = CopyRecord {
            id: "copy_1".into(),
            peer: "east".into(),
            grant: "g".into(),
            model: "m".into(),
            revision: "r".into(),
            state: CopyState::Stopped,
            code: Some("digest_mismatch".into()),
            message: None,
            bytes_held: 0,
            bytes_total: 1 << 20,
            files: Vec::new(),
            reconnects: Vec::new(),
            created_at: String::new(),
            updated_at: String::new(),
        };
        assert!(line(&record).contains("stopped (digest_mismatch)"));
        assert!(render_copies(&[record]).contains("digest_mismatch"));
    }
}
