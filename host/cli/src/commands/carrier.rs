//! `switchyard carrier status|switch|abort`: the cluster's carrier set and
//! its live changes (`GET/POST /api/cluster/carrier`).
//!
//! `switch` posts a dry run first and shows its preflight, asks, posts the
//! change, and with `--wait` prints one line per phase as the row reaches
//! it (`prepare`, `commit`, `stable`, or `aborted`), each with the time
//! since the change was asked for. Lines, not a redrawn board: a phase is
//! reached once, and the output reads the same in a log.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use switchyard_protocol::carrier::{
    Blocked, CarrierChange, CarrierStatus, ChangeMoved, ChangeRecord, Pin, Pins, Preflight,
    ReplicaReport, blockers,
};

use crate::cli::{ApiArgs, SwitchArgs};

mod phases;
use crate::client::{Client, api_error};
pub use phases::{End, Phases};

/// How often `--wait` reads the row: a phase of a fast change lasts a few
/// hundred milliseconds, and a read is one indexed row.
const POLL: Duration = Duration::from_millis(200);
/// How long `--wait` keeps polling a server that does not answer: a
/// replica restarting is back within it; the change itself is bounded by
/// the prepare timeout and the window.
const UNANSWERED: Duration = Duration::from_secs(10);
const PATH: &str = "/api/cluster/carrier";

/// `; request → commit 0.21 s, commit → settled 0.05 s` for a change to
/// `target` that settled.
fn settled_times(change: &ChangeRecord, target: &str) -> String {
    match (
        change.outcome.as_deref(),
        change.prepare_ms,
        change.drain_ms,
    ) {
        (Some("settled"), Some(prepare), Some(drain)) if change.to == target => format!(
            "; request → commit {:.2} s, commit → settled {:.2} s",
            prepare / 1000.0,
            drain / 1000.0
        ),
        _ => String::new(),
    }
}

/// `: <why>` for a change that aborted.
fn abort_reason(change: &ChangeRecord) -> String {
    match (change.outcome.as_deref(), &change.reason) {
        (Some("aborted"), Some(why)) => format!(": {why}"),
        _ => String::new(),
    }
}

pub async fn status(json: bool, api: ApiArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&api);
    let body = client.send(client.request(Method::GET, PATH)).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&body)?);
    } else {
        print!("{}", render_status(&serde_json::from_value(body)?));
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn abort(api: ApiArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&api);
    let body = CarrierChange {
        abort: true,
        ..CarrierChange::default()
    };
    let moved: ChangeMoved =
        serde_json::from_value(client.send_json(Method::POST, PATH, &body).await?)?;
    println!(
        "aborted: epoch {}, state {}",
        moved.epoch,
        moved.state.as_str()
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn switch(args: SwitchArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args.api);
    let mut change = CarrierChange {
        target: Some(args.to.clone()),
        plugins: args.plugins.iter().cloned().collect(),
        dry_run: true,
        force: args.force,
        abort: false,
    };
    let preflight: Preflight = match client
        .answer(client.request(Method::POST, PATH).json(&change))
        .await?
    {
        (status, body) if status.is_success() => serde_json::from_value(body)?,
        (status, body) => return Err(refusal(status, body)),
    };
    print!("{}", render_preflight(&args.to, &preflight));
    if args.dry_run {
        return Ok(if preflight.ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    if !goes_ahead(&preflight, args.force) {
        bail!("the change is blocked; nothing was started");
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            bail!("stdin is not a terminal: pass --yes to switch without being asked");
        }
        if !confirm("Proceed? [y/N] ")? {
            println!("not started");
            return Ok(ExitCode::FAILURE);
        }
    }
    change.dry_run = false;
    let asked = Instant::now();
    let moved: ChangeMoved = match client
        .answer(client.request(Method::POST, PATH).json(&change))
        .await?
    {
        (status, body) if status.is_success() => serde_json::from_value(body)?,
        (status, body) => return Err(refusal(status, body)),
    };
    println!(
        "started: epoch {}, state {}",
        moved.epoch,
        moved.state.as_str()
    );
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }
    let mut phases = Phases::new(&args.to, change.plugins.clone(), moved.epoch);
    let mut answered = Instant::now();
    loop {
        // A replica that stops answering (restarted, or the leader killed
        // mid-change) does not end the wait at once: the change goes on
        // without it. A refusal (4xx) does.
        let status: CarrierStatus = match client.answer(client.request(Method::GET, PATH)).await {
            Ok((code, body)) if code.is_success() => {
                answered = Instant::now();
                serde_json::from_value(body)?
            }
            Ok((code, body)) if code.is_client_error() => return Err(api_error(code, body)),
            outcome => {
                if answered.elapsed() > UNANSWERED {
                    return Err(match outcome {
                        Ok((code, body)) => api_error(code, body),
                        Err(e) => e,
                    }
                    .context(format!(
                        "no answer for {} s while waiting for the change",
                        UNANSWERED.as_secs()
                    )));
                }
                tokio::time::sleep(POLL).await;
                continue;
            }
        };
        let (lines, end) = phases.step(&status, asked.elapsed());
        for line in lines {
            println!("{line}");
        }
        let _ = std::io::stdout().flush();
        match end {
            Some(End::Settled) => return Ok(ExitCode::SUCCESS),
            Some(End::Aborted) => return Ok(ExitCode::FAILURE),
            None => tokio::time::sleep(POLL).await,
        }
    }
}

/// Whether a preflight lets the change go: nothing blocks it, or only
/// workers that cannot follow and `--force` says go anyway (the server
/// judges again on the real request).
fn goes_ahead(preflight: &Preflight, force: bool) -> bool {
    preflight.ok
        || (force
            && preflight
                .blockers
                .iter()
                .all(|b| b.code == blockers::WORKER_CANNOT_FOLLOW))
}

/// Asks on the terminal; only `y` or `yes` goes ahead.
fn confirm(question: &str) -> anyhow::Result<bool> {
    eprint!("{question}");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// A refused change as an error: its code and message, and the blockers a
/// 422 `blocked` lists.
fn refusal(status: StatusCode, body: Value) -> anyhow::Error {
    let blockers = serde_json::from_value::<Blocked>(body.clone())
        .map(|blocked| blocked.blockers)
        .unwrap_or_default();
    let listed: Vec<String> = blockers
        .iter()
        .map(|b| format!("\n  blocker {}: {}", b.code, b.message))
        .collect();
    anyhow::anyhow!("{:#}{}", api_error(status, body), listed.concat())
}

/// The status, as `carrier status` prints it.
pub fn render_status(status: &CarrierStatus) -> String {
    let dash = || "-".to_string();
    let mut out = String::new();
    let field = |out: &mut String, name: &str, value: String| {
        out.push_str(&format!("{:<12}{value}\n", format!("{name}:")));
    };
    field(
        &mut out,
        "carrier",
        status.carrier.clone().unwrap_or_else(dash),
    );
    field(&mut out, "plugins", plugins(&status.plugins));
    for warning in &status.trust_warnings {
        field(&mut out, "trust", warning.clone());
    }
    field(
        &mut out,
        "epoch",
        status.epoch.map(|e| e.to_string()).unwrap_or_else(dash),
    );
    field(
        &mut out,
        "state",
        status
            .state
            .map(|s| s.as_str().to_string())
            .unwrap_or_else(dash),
    );
    field(
        &mut out,
        "target",
        status.target.clone().unwrap_or_else(dash),
    );
    field(
        &mut out,
        "draining",
        status.draining.clone().unwrap_or_else(dash),
    );
    field(
        &mut out,
        "drain left",
        status
            .drain_left_ms
            .map(|ms| seconds(ms.max(0) as u64))
            .unwrap_or_else(dash),
    );
    out.push_str(&replicas(&status.replicas));
    out.push_str(&format!("\nworkers ({})\n", status.workers.len()));
    let mut rows = vec![row(["NODE", "ATTACHED", "EPOCH SEEN", "CANNOT FOLLOW"])];
    for w in &status.workers {
        rows.push(vec![
            w.node.clone(),
            list_or_dash(w.attached.iter().cloned()),
            w.epoch_seen.map(|e| e.to_string()).unwrap_or_else(dash),
            list_or_dash(
                w.cannot_follow
                    .iter()
                    .map(|(set, why)| format!("{set} ({why})")),
            ),
        ]);
    }
    out.push_str(&table(&rows));
    out
}

/// The live replicas, as a table under a heading.
fn replicas(replicas: &[ReplicaReport]) -> String {
    let mut rows = vec![row(["ID", "VERSION", "EPOCH", "READY", "CAN BUILD"])];
    for r in replicas {
        rows.push(vec![
            r.id.clone(),
            r.version.clone(),
            r.epoch.to_string(),
            if r.ready { "yes" } else { "no" }.to_string(),
            list_or_dash(
                r.can_build
                    .iter()
                    .map(|(set, can)| match (&can.reason, can.ok) {
                        (_, true) => format!("{set} ok"),
                        (Some(why), false) => format!("{set} no ({why})"),
                        (None, false) => format!("{set} no"),
                    }),
            ),
        ]);
    }
    format!("\nreplicas ({})\n{}", replicas.len(), table(&rows))
}

/// The preflight, as `carrier switch` prints it before it asks.
pub fn render_preflight(target: &str, preflight: &Preflight) -> String {
    let mut out = format!(
        "preflight → {target}: {}\n",
        if preflight.ok { "ok" } else { "blocked" }
    );
    for b in &preflight.blockers {
        out.push_str(&format!("  blocker {}: {}\n", b.code, b.message));
    }
    out.push_str(&replicas(&preflight.report.replicas));
    out
}

/// `nats 0.1.0 (sha256 0123456789ab), ...`
fn plugins(pins: &Pins) -> String {
    list_or_dash(pins.iter().map(|(name, Pin { version, sha256 })| {
        format!(
            "{name} {version} (sha256 {})",
            &sha256[..sha256.len().min(12)]
        )
    }))
}

pub(super) fn list_or_dash(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    if items.is_empty() {
        "-".into()
    } else {
        items.join(", ")
    }
}

pub(super) fn row<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// Rows with each column as wide as its widest cell, two spaces apart,
/// indented by two; the last column is not padded.
pub(super) fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from(" ");
        for (i, cell) in r.iter().enumerate() {
            line.push(' ');
            line.push_str(cell);
            if i + 1 < r.len() {
                let pad = widths[i] - cell.chars().count() + 1;
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `12.3 s`
fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests;
