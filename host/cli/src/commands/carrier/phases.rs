//! `carrier switch --wait`: the phases a change reached, one line each as
//! the polls see them, and how it ended.

use std::collections::BTreeMap;
use std::time::Duration;

use switchyard_protocol::carrier::{CarrierStatus, Pins};
use switchyard_protocol::state::CarrierRowState;

use super::{abort_reason, seconds, settled_times};

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
