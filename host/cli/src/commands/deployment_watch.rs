//! `switchyard deployment status <id> --watch` and `deployment create
//! --wait`: polls the deployment and shows one line per replica on stderr,
//! a progress bar while its files are staged and its state otherwise (and
//! why the deployment is pending, when it is), until every wanted replica
//! is ready or one has failed.
//!
//! On a terminal the lines are redrawn in place; otherwise a line is
//! printed when a replica's state changes (staging, by tenths).

use std::collections::HashSet;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::progress::bar;
use crate::client::Client;

/// How often the deployment is read again.
const POLL: Duration = Duration::from_millis(500);

/// How a watch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every wanted replica is ready.
    Ready,
    /// A replica failed: its id and why.
    Failed(String, String),
}

/// Watches deployment `id` until it is ready or a replica failed; returns
/// how it ended and the deployment as last read.
pub async fn watch(client: &Client, id: &str) -> anyhow::Result<(Outcome, Value)> {
    let mut board = Board::new(std::io::stderr().is_terminal());
    loop {
        let shown = client
            .send(client.request(Method::GET, &format!("/api/deployments/{id}")))
            .await?;
        let wanted = shown["deployment"]["replicas"].as_u64().unwrap_or(0) as usize;
        let replicas = shown["replicas_status"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut lines: Vec<(String, String)> = replicas.iter().map(|r| (key(r), line(r))).collect();
        if let Some(reason) = shown["deployment"]["pending_reason"].as_str() {
            lines.push((reason.to_string(), format!("pending: {reason}")));
        }
        board.show(&lines);
        if let Some(failed) = replicas.iter().find(|r| r["state"] == "failed") {
            let replica = failed["id"].as_str().unwrap_or_default().to_string();
            let why = failed["detail"].as_str().unwrap_or_default().to_string();
            eprintln!("replica {replica} failed: {why}");
            return Ok((Outcome::Failed(replica, why), shown));
        }
        let ready = replicas.iter().filter(|r| r["state"] == "ready").count();
        if ready >= wanted && replicas.len() == wanted {
            eprintln!("{ready} of {wanted} replicas ready");
            return Ok((Outcome::Ready, shown));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// What a replica's line says now; a change prints a new line off a terminal.
fn key(replica: &Value) -> String {
    let id = replica["id"].as_str().unwrap_or("?");
    let state = replica["state"].as_str().unwrap_or("?");
    match staging(replica) {
        Some((held, total)) if total > 0 => format!("{id}:{state}:{}", held * 10 / total),
        _ => format!("{id}:{state}"),
    }
}

/// Bytes staged of the total, while the replica stages.
fn staging(replica: &Value) -> Option<(u64, u64)> {
    Some((
        replica["staged_bytes"].as_u64()?,
        replica["staging_total_bytes"].as_u64()?,
    ))
}

/// `rep_… on node_…  staging [====   ]  45% 1.2/2.7 MiB`, or the state and why.
fn line(replica: &Value) -> String {
    let id = replica["id"].as_str().unwrap_or("?");
    let node = replica["node_id"].as_str().unwrap_or("?");
    let state = replica["state"].as_str().unwrap_or("?");
    let what = match (state, staging(replica), replica["detail"].as_str()) {
        ("staging", Some((held, total)), _) => format!("staging {}", bar(held, total)),
        (_, _, Some(detail)) if !detail.is_empty() => format!("{state}: {detail}"),
        _ => state.to_string(),
    };
    format!("{id} on {node}  {what}")
}

/// The lines on screen.
struct Board {
    terminal: bool,
    drawn: usize,
    printed: HashSet<String>,
}

impl Board {
    fn new(terminal: bool) -> Self {
        Self {
            terminal,
            drawn: 0,
            printed: HashSet::new(),
        }
    }

    fn show(&mut self, lines: &[(String, String)]) {
        let mut err = std::io::stderr().lock();
        if self.terminal {
            // Up over the last drawing, then each line cleared and drawn again.
            if self.drawn > 0 {
                let _ = write!(err, "\x1b[{}A", self.drawn);
            }
            for (_, text) in lines {
                let _ = writeln!(err, "\x1b[2K{text}");
            }
            // Lines left over from a longer drawing are cleared.
            for _ in lines.len()..self.drawn {
                let _ = writeln!(err, "\x1b[2K");
            }
            self.drawn = self.drawn.max(lines.len());
        } else {
            for (key, text) in lines {
                if self.printed.insert(key.clone()) {
                    let _ = writeln!(err, "{text}");
                }
            }
        }
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_staging_replica_shows_a_bar_and_others_their_state() {
        let staging = json!({"id": "rep_1", "node_id": "node_a", "state": "staging",
            "detail": "staging 1.0 of 4.0 MiB", "staged_bytes": 1 << 20, "staging_total_bytes": 4 << 20});
        assert_eq!(
            line(&staging),
            format!("rep_1 on node_a  staging {}", bar(1 << 20, 4 << 20))
        );
        assert_eq!(key(&staging), "rep_1:staging:2");
        let placed = json!({"id": "rep_2", "node_id": "node_b", "state": "placed",
            "detail": "waiting for the node: no session"});
        assert_eq!(
            line(&placed),
            "rep_2 on node_b  placed: waiting for the node: no session"
        );
        let ready = json!({"id": "rep_3", "node_id": "node_b", "state": "ready", "detail": null});
        assert_eq!(line(&ready), "rep_3 on node_b  ready");
        assert_eq!(key(&ready), "rep_3:ready");
    }
}
