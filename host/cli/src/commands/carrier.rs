//! `switchyard carrier status|switch|abort`: the cluster's carrier set and
//! its live changes (`GET/POST /api/cluster/carrier`).
//!
//! `switch` posts a dry run first and shows its preflight, asks, posts the
//! change, and with `--wait` prints one line per phase as the row reaches
//! it (`prepare`, `commit`, `stable`, or `aborted`), each with the time
//! since the change was asked for. Lines, not a redrawn board: a phase is
//! reached once, and the output reads the same in a log.

use std::collections::BTreeMap;
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
use switchyard_protocol::state::CarrierRowState;

use crate::cli::{ApiArgs, SwitchArgs};
use crate::client::{Client, api_error};

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

/// How a waited-on change ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Stable on the target.
    Settled,
    /// Back to stable without reaching the target.
    Aborted,
}

/// The phases a change reached, drawn once each as the polls see them.
#[derive(Debug)]
pub struct Phases {
    target: String,
    /// Versions asked for (`--plugin`); the settled row must run them.
    versions: BTreeMap<String, String>,
    /// The epoch the change began at (its prepare).
    began: i64,
    drawn: Vec<&'static str>,
}

impl Phases {
    /// A change to `target` that moved the row to prepare at epoch `began`.
    pub fn new(target: &str, versions: BTreeMap<String, String>, began: i64) -> Self {
        Self {
            target: target.to_string(),
            versions,
            began,
            drawn: Vec::new(),
        }
    }

    /// The lines for the phases `status` shows reached since the last
    /// call, at `elapsed` since the change was asked for, and how the
    /// change ended if it did. A settle takes two moves after the
    /// prepare (commit, then settle): a stable row only one move on is an
    /// abort, whatever set it names (a version upgrade keeps the set).
    pub fn step(
        &mut self,
        status: &CarrierStatus,
        elapsed: Duration,
    ) -> (Vec<String>, Option<End>) {
        let mut lines = Vec::new();
        let epoch = status.epoch.unwrap_or(self.began);
        let active = status.carrier.as_deref().unwrap_or("-");
        let target = self.target.clone();
        match status.state {
            Some(CarrierRowState::Prepare) if epoch == self.began => {
                self.draw(&mut lines, "prepare", elapsed, || {
                    format!("every replica builds {target} beside {active}")
                });
            }
            Some(CarrierRowState::Commit) => {
                self.draw(&mut lines, "prepare", elapsed, || "passed".into());
                let draining = status.draining.as_deref().unwrap_or("the old set");
                let left = status
                    .drain_left_ms
                    .map(|ms| format!(" (at most {} left)", seconds(ms.max(0) as u64)))
                    .unwrap_or_default();
                self.draw(&mut lines, "commit", elapsed, || {
                    format!("{active} active; {draining} drains{left}")
                });
            }
            Some(CarrierRowState::Stable) if epoch > self.began => {
                let reached = epoch >= self.began + 2
                    && active == target
                    && self.runs_versions(&status.plugins);
                if reached {
                    self.draw(&mut lines, "prepare", elapsed, || "passed".into());
                    self.draw(&mut lines, "commit", elapsed, || "passed".into());
                    self.draw(&mut lines, "stable", elapsed, || {
                        let times = status
                            .last_change
                            .as_ref()
                            .map(|c| settled_times(c, &target))
                            .unwrap_or_default();
                        format!("settled on {active} (epoch {epoch}){times}")
                    });
                    return (lines, Some(End::Settled));
                }
                self.draw(&mut lines, "aborted", elapsed, || {
                    let why = status
                        .last_change
                        .as_ref()
                        .map(abort_reason)
                        .unwrap_or_default();
                    format!(
                        "back to stable on {active} (epoch {epoch}) without reaching {target}{why}"
                    )
                });
                return (lines, Some(End::Aborted));
            }
            _ => {}
        }
        (lines, None)
    }

    fn runs_versions(&self, pins: &Pins) -> bool {
        self.versions
            .iter()
            .all(|(name, version)| pins.get(name).is_some_and(|p| &p.version == version))
    }

    /// `commit     1.23 s  tunnel active; nats drains`, once per phase.
    fn draw(
        &mut self,
        lines: &mut Vec<String>,
        phase: &'static str,
        elapsed: Duration,
        what: impl FnOnce() -> String,
    ) {
        if self.drawn.contains(&phase) {
            return;
        }
        self.drawn.push(phase);
        lines.push(format!(
            "{phase:<8}{:>8.2} s  {}",
            elapsed.as_secs_f64(),
            what()
        ));
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use serde_json::json;

    use super::*;
    use crate::cli::{CarrierCommand, Cli, Command};
    use switchyard_protocol::carrier::Blocker;

    fn status(value: Value) -> CarrierStatus {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn switch_takes_a_target_repeated_plugins_and_its_flags() {
        let cli = Cli::try_parse_from([
            "switchyard",
            "carrier",
            "switch",
            "--to",
            "nats",
            "--plugin",
            "nats@0.2.0",
            "--plugin",
            "tunnel@0.3.0",
            "--dry-run",
            "--force",
            "--yes",
            "--wait",
        ])
        .unwrap();
        let Command::Carrier(CarrierCommand::Switch(args)) = cli.command else {
            panic!("not a switch");
        };
        assert_eq!(args.to, "nats");
        assert_eq!(
            args.plugins,
            [
                ("nats".into(), "0.2.0".into()),
                ("tunnel".into(), "0.3.0".into())
            ]
        );
        assert!(args.dry_run && args.force && args.yes && args.wait);

        let plain =
            Cli::try_parse_from(["switchyard", "carrier", "switch", "--to", "tunnel"]).unwrap();
        let Command::Carrier(CarrierCommand::Switch(args)) = plain.command else {
            panic!("not a switch");
        };
        assert!(args.plugins.is_empty() && !args.dry_run && !args.force && !args.yes && !args.wait);

        for bad in [
            vec!["switchyard", "carrier", "switch"],
            vec![
                "switchyard",
                "carrier",
                "switch",
                "--to",
                "nats",
                "--plugin",
                "nats",
            ],
            vec![
                "switchyard",
                "carrier",
                "switch",
                "--to",
                "nats",
                "--plugin",
                "@0.1.0",
            ],
        ] {
            assert!(Cli::try_parse_from(&bad).is_err(), "{bad:?}");
        }
        assert!(Cli::try_parse_from(["switchyard", "carrier", "status", "--json"]).is_ok());
        assert!(Cli::try_parse_from(["switchyard", "carrier", "abort"]).is_ok());
    }

    #[test]
    fn status_prints_the_row_the_replicas_and_the_workers() {
        let shown = render_status(&status(json!({
            "carrier": "nats",
            "plugins": {"nats": {"version": "0.1.0", "sha256": "ab".repeat(32)}},
            "epoch": 8, "state": "commit", "target": null, "draining": "tunnel",
            "drain_left_ms": 2500,
            "replicas": [
                {"id": "r1", "version": "0.4.0", "epoch": 8, "ready": true,
                 "can_build": {"nats": {"ok": true}, "tunnel": {"ok": true}}},
                {"id": "replica-two", "version": "0.4.0", "epoch": 7, "ready": false,
                 "can_build": {"nats": {"ok": false, "reason": "no NATS URL"}}}
            ],
            "workers": [
                {"node": "n1", "attached": ["nats", "tunnel"], "epoch_seen": 8, "cannot_follow": {}},
                {"node": "n2", "attached": ["tunnel"], "epoch_seen": null,
                 "cannot_follow": {"nats": "no routable --address"}}
            ],
            "in_flight": {"streams": 0, "units": 0}, "settings": {}
        })));
        assert_eq!(
            shown,
            "\
carrier:    nats
plugins:    nats 0.1.0 (sha256 abababababab)
epoch:      8
state:      commit
target:     -
draining:   tunnel
drain left: 2.5 s

replicas (2)
  ID           VERSION  EPOCH  READY  CAN BUILD
  r1           0.4.0    8      yes    nats ok, tunnel ok
  replica-two  0.4.0    7      no     nats no (no NATS URL)

workers (2)
  NODE  ATTACHED      EPOCH SEEN  CANNOT FOLLOW
  n1    nats, tunnel  8           -
  n2    tunnel        -           nats (no routable --address)
"
        );
    }

    #[test]
    fn the_preflight_lists_its_blockers_and_the_live_replicas() {
        let preflight = Preflight {
            ok: false,
            blockers: vec![Blocker {
                code: blockers::WORKER_CANNOT_FOLLOW.into(),
                message: "node n2: no routable --address".into(),
            }],
            report: status(json!({"carrier": "tunnel", "replicas": [
                {"id": "r1", "version": "0.4.0", "epoch": 3, "ready": true,
                 "can_build": {"nats": {"ok": true}}}
            ]})),
        };
        assert_eq!(
            render_preflight("nats", &preflight),
            "\
preflight → nats: blocked
  blocker worker_cannot_follow: node n2: no routable --address

replicas (1)
  ID  VERSION  EPOCH  READY  CAN BUILD
  r1  0.4.0    3      yes    nats ok
"
        );
        assert!(!goes_ahead(&preflight, false));
        assert!(
            goes_ahead(&preflight, true),
            "force overrides worker blockers"
        );
        let replica = Preflight {
            blockers: vec![Blocker {
                code: blockers::REPLICA_CANNOT_BUILD.into(),
                message: "r1: no NATS URL".into(),
            }],
            ..preflight
        };
        assert!(
            !goes_ahead(&replica, true),
            "force never overrides a replica"
        );
    }

    fn row(state: &str, carrier: &str, epoch: i64) -> CarrierStatus {
        status(json!({"carrier": carrier, "epoch": epoch, "state": state,
            "draining": if state == "commit" { json!("nats") } else { Value::Null },
            "drain_left_ms": 30000,
            "plugins": {carrier: {"version": "0.2.0", "sha256": "00"}}}))
    }

    #[test]
    fn wait_draws_each_phase_once_with_its_time_until_settled() {
        let mut phases = Phases::new("tunnel", BTreeMap::new(), 5);
        let at = Duration::from_millis;
        let (lines, end) = phases.step(&row("prepare", "nats", 5), at(10));
        assert_eq!(
            lines,
            ["prepare     0.01 s  every replica builds tunnel beside nats"]
        );
        assert_eq!(end, None);
        assert_eq!(
            phases.step(&row("prepare", "nats", 5), at(210)),
            (vec![], None)
        );
        let (lines, end) = phases.step(&row("commit", "tunnel", 6), at(1234));
        assert_eq!(
            lines,
            ["commit      1.23 s  tunnel active; nats drains (at most 30.0 s left)"]
        );
        assert_eq!(end, None);
        let mut settled = row("stable", "tunnel", 7);
        settled.last_change = Some(ChangeRecord {
            to: "tunnel".into(),
            outcome: Some("settled".into()),
            prepare_ms: Some(1210.4),
            drain_ms: Some(52.0),
            ..ChangeRecord::default()
        });
        let (lines, end) = phases.step(&settled, at(1500));
        assert_eq!(
            lines,
            [
                "stable      1.50 s  settled on tunnel (epoch 7); request → commit 1.21 s, commit → settled 0.05 s"
            ]
        );
        assert_eq!(end, Some(End::Settled));
    }

    #[test]
    fn a_poll_that_misses_phases_still_draws_them_in_order() {
        let mut phases = Phases::new("tunnel", BTreeMap::new(), 5);
        let (lines, end) = phases.step(&row("stable", "tunnel", 7), Duration::from_millis(400));
        assert_eq!(
            lines,
            [
                "prepare     0.40 s  passed",
                "commit      0.40 s  passed",
                "stable      0.40 s  settled on tunnel (epoch 7)"
            ]
        );
        assert_eq!(end, Some(End::Settled));
    }

    #[test]
    fn a_change_back_to_stable_without_its_target_is_an_abort() {
        let mut phases = Phases::new("tunnel", BTreeMap::new(), 5);
        phases.step(&row("prepare", "nats", 5), Duration::ZERO);
        let mut aborted = row("stable", "nats", 6);
        aborted.last_change = Some(ChangeRecord {
            to: "tunnel".into(),
            outcome: Some("aborted".into()),
            reason: Some("the prepare timed out: replica r1 has not built `tunnel`".into()),
            ..ChangeRecord::default()
        });
        let (lines, end) = phases.step(&aborted, Duration::from_secs(60));
        assert_eq!(
            lines,
            [
                "aborted    60.00 s  back to stable on nats (epoch 6) without reaching tunnel: the prepare timed out: replica r1 has not built `tunnel`"
            ]
        );
        assert_eq!(end, Some(End::Aborted));

        // A version upgrade keeps the set: one move after the prepare is
        // an abort though the set is the target; the versions asked for
        // must run once settled.
        let upgrade = || Phases::new("nats", [("nats".into(), "0.2.0".into())].into(), 5);
        assert_eq!(
            upgrade().step(&row("stable", "nats", 6), Duration::ZERO).1,
            Some(End::Aborted)
        );
        assert_eq!(
            upgrade().step(&row("stable", "nats", 7), Duration::ZERO).1,
            Some(End::Settled)
        );
        let mut older = row("stable", "nats", 7);
        older.plugins.get_mut("nats").unwrap().version = "0.1.0".into();
        assert_eq!(upgrade().step(&older, Duration::ZERO).1, Some(End::Aborted));
    }

    #[test]
    fn a_blocked_answer_lists_its_blockers() {
        let body = serde_json::to_value(Blocked {
            error: switchyard_protocol::admin::ErrorDetail {
                code: "blocked".into(),
                message: "the change is blocked".into(),
            },
            blockers: vec![Blocker {
                code: "replica_cannot_build".into(),
                message: "r1: no NATS URL".into(),
            }],
            report: CarrierStatus::default(),
        })
        .unwrap();
        let text = format!("{:#}", refusal(StatusCode::UNPROCESSABLE_ENTITY, body));
        assert!(text.contains("422 Unprocessable Entity blocked"), "{text}");
        assert!(
            text.contains("blocker replica_cannot_build: r1: no NATS URL"),
            "{text}"
        );
        let conflict = json!({"error": {"code": "change_under_way", "message": "epoch 4"}});
        let text = format!("{:#}", refusal(StatusCode::CONFLICT, conflict));
        assert_eq!(text, "409 Conflict change_under_way: epoch 4");
    }
}
