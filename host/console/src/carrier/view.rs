//! How the carrier pages draw the API's answers: the status (set, state,
//! replicas, workers, work in flight, the last change), the phases of a
//! change, and a preflight with its confirmation.

use maud::{Markup, html};
use switchyard_protocol::carrier::{CarrierStatus, Pins, Preflight, ReplicaReport, WorkerReport};
use switchyard_protocol::state::CarrierRowState;

use super::super::page::{self, csrf_field};
use super::super::session::Session;
use super::Switch;

/// The phases a change goes through, in order.
const PHASES: [&str; 4] = ["prepare", "commit", "drain", "stable"];

/// Where a change is: how many phases are done, and whether it is over.
fn progress(status: &CarrierStatus) -> (usize, bool) {
    match status.state {
        Some(CarrierRowState::Prepare) => (0, false),
        // The target is active; the old set drains until the settle.
        Some(CarrierRowState::Commit) => (2, false),
        _ => (PHASES.len(), true),
    }
}

/// The phases of the newest change, drawn as they happen; `data-final`
/// once it settled or aborted (the page stops asking).
pub fn phases(session: &Session, status: &CarrierStatus) -> Markup {
    let (done, over) = progress(status);
    let change = status.last_change.as_ref();
    let aborted = change.is_some_and(|c| c.outcome.as_deref() == Some("aborted"));
    let label = match (status.state, change) {
        (Some(CarrierRowState::Prepare), _) => format!(
            "Preparing the change to {}: every replica builds it, every worker attaches.",
            status.target.as_deref().unwrap_or("?")
        ),
        (Some(CarrierRowState::Commit), _) => format!(
            "Committed: {} is active; {} drains.",
            status.carrier.as_deref().unwrap_or("?"),
            status.draining.as_deref().unwrap_or("the old set")
        ),
        (_, Some(c)) if aborted => format!(
            "The change from {} to {} was aborted: {}.",
            c.from,
            c.to,
            c.reason.as_deref().unwrap_or("no reason given")
        ),
        (_, Some(c)) => format!(
            "Stable on {}: the last change, {} → {}, {}.",
            status.carrier.as_deref().unwrap_or("?"),
            c.from,
            c.to,
            c.outcome.as_deref().unwrap_or("settled")
        ),
        (_, None) => format!(
            "Stable on {}; no change yet.",
            status.carrier.as_deref().unwrap_or("no set")
        ),
    };
    html! {
        div.change-phases data-final[over] {
            @if change.is_some() || !over {
                ol.phases aria-label="Phases of the change" {
                    @for (i, phase) in PHASES.iter().enumerate() {
                        @if aborted && over && i > 0 {
                            li { (phase) }
                        } @else if aborted && over {
                            li.current { "prepare: aborted" }
                        } @else if i < done {
                            li.done { (phase) " ✓" }
                        } @else if i == done {
                            li.current aria-current="step" { (phase) "…" }
                        } @else {
                            li { (phase) }
                        }
                    }
                }
            }
            p role="status" { (label) }
            @if status.state == Some(CarrierRowState::Prepare) {
                @let target = status.target.as_deref().unwrap_or("");
                @let built = status.replicas.iter().filter(|r| r.ready).count();
                @let attached = status.workers.iter().filter(|w| w.attached.iter().any(|a| a == target)).count();
                p { "Replicas ready: " (built) " of " (status.replicas.len()) }
                (page::progress("Replicas ready", built as f64, status.replicas.len() as f64))
                p { "Workers attached to " (target) ": " (attached) " of " (status.workers.len()) }
                (page::progress("Workers attached", attached as f64, status.workers.len() as f64))
            }
            @if let Some(left) = status.prepare_left_ms {
                p.hint { (seconds(left)) " left before the prepare times out and aborts itself." }
            }
            @if status.state == Some(CarrierRowState::Prepare) {
                form.inline method="post" action="/console/carrier/abort" {
                    (csrf_field(session))
                    button.danger type="submit" { "Abort the change" }
                    span.hint { "The cluster stays on its set." }
                }
            }
            @if let Some(left) = status.drain_left_ms {
                p.hint { "The old set drains for at most " (seconds(left)) " more." }
            }
            @if let Some(c) = change {
                p.muted {
                    @if let Some(ms) = c.prepare_ms { "prepare took " (format!("{ms:.0} ms")) }
                    @if let Some(ms) = c.drain_ms { " · drain took " (format!("{ms:.0} ms")) }
                }
            }
        }
    }
}

fn seconds(ms: i64) -> String {
    format!("{:.1} s", ms.max(0) as f64 / 1000.0)
}

/// The whole status.
pub fn status(s: &CarrierStatus) -> Markup {
    let state = s.state.map(|st| st.as_str()).unwrap_or("none");
    html! {
        div.cards {
            div.card {
                h2 { "Carrier set" }
                p.figure { (s.carrier.as_deref().unwrap_or("none")) }
                (pins(&s.plugins))
            }
            div.card {
                h2 { "State" }
                p.figure { span class=(format!("state {state}")) { (state) } }
                p { "epoch " (s.epoch.map(|e| e.to_string()).unwrap_or_else(|| "-".into())) }
                @if let Some(target) = &s.target { p { "target " strong { (target) } } }
                @if let Some(draining) = &s.draining { p { "draining " strong { (draining) } } }
                @if s.forced { p.muted { "forced" } }
            }
            div.card {
                h2 { "In flight" }
                p.figure { (s.in_flight.streams) }
                p { "streams on this replica · " (s.in_flight.units) " queued units" }
            }
            div.card {
                h2 { "This replica" }
                p { "runs " strong { (s.running.as_deref().unwrap_or("nothing")) } }
                p {
                    @if s.connected { span.state.ok { "connected" } } @else { span.state.failed { "not connected" } }
                }
                @if let Some(plugin) = &s.plugin {
                    p { "plugin " (plugin.state)
                        @if plugin.failed_rebuilds > 0 { " · " (plugin.failed_rebuilds) " failed rebuilds" } }
                    @if let Some(error) = &plugin.last_error { p.flash.error { (error) } }
                }
            }
        }
        @for warning in &s.trust_warnings {
            p.flash.warn role="status" { (warning) }
        }
        h2 { "Replicas" }
        (replicas(&s.replicas, None))
        h2 { "Workers" }
        (workers(&s.workers, None))
        @if let Some(c) = &s.last_change {
            h2 { "Last change" }
            p {
                (c.from) " → " (c.to) ": "
                @match c.outcome.as_deref() {
                    Some("aborted") => { span.state.failed { "aborted" } @if let Some(r) = &c.reason { " (" (r) ")" } }
                    Some(outcome) => { span.state.ok { (outcome) } }
                    None => { span.state.pending { "under way" } }
                }
                @if let Some(ms) = c.prepare_ms { " · prepare " (format!("{ms:.0} ms")) }
                @if let Some(ms) = c.drain_ms { " · drain " (format!("{ms:.0} ms")) }
            }
        }
    }
}

fn pins(pins: &Pins) -> Markup {
    html! {
        @if !pins.is_empty() {
            ul.pins {
                @for (name, pin) in pins {
                    li { code { (name) " " (pin.version) } " " span.muted title=(pin.sha256) { (pin.sha256.get(..12).unwrap_or(&pin.sha256)) "…" } }
                }
            }
        }
    }
}

/// The live replicas; with `target`, whether each can build it.
fn replicas(replicas: &[ReplicaReport], target: Option<&str>) -> Markup {
    html! {
        @if replicas.is_empty() {
            (page::empty("No live replica reported.", html! { "Replicas report while they run; start one with " code { "switchyard serve" } "." }))
        } @else {
            div.table-wrap { table {
                thead { tr {
                    th { "Replica" } th { "Build" } th { "Epoch" } th { "Ready" }
                    @if let Some(target) = target { th { "Can build " (target) } } @else { th { "Can build" } }
                } }
                tbody {
                    @for r in replicas {
                        tr {
                            td { code { (r.id) } }
                            td { (r.version) }
                            td { (r.epoch) }
                            td { @if r.ready { span.state.ok { "ready" } } @else { span.state.pending { "not ready" } } }
                            td {
                                @for (set, can) in r.can_build.iter().filter(|(set, _)| target.is_none_or(|t| t == set.as_str())) {
                                    @if target.is_none() { (set) " " }
                                    @if can.ok { span.state.ok { "yes" } } @else { span.state.failed { "no" } }
                                    @if let Some(reason) = &can.reason { " " span.muted { (reason) } }
                                    " "
                                }
                            }
                        }
                    }
                }
            } }
        }
    }
}

/// The workers; with `target`, whether each can follow to it.
fn workers(workers: &[WorkerReport], target: Option<&str>) -> Markup {
    html! {
        @if workers.is_empty() {
            (page::empty("No approved worker is online.", html! { "Approve a node on the " a href="/console/nodes" { "Nodes" } " page; it attaches to the carrier once approved." }))
        } @else {
            div.table-wrap { table {
                thead { tr { th { "Node" } th { "Attached" } th { "Epoch seen" } th { "Cannot follow" } th { "Demoted" } } }
                tbody {
                    @for w in workers {
                        tr {
                            td { code { (w.node) } }
                            td { @if w.attached.is_empty() { span.muted { "none" } } @else { (w.attached.join(", ")) } }
                            td { (w.epoch_seen.map(|e| e.to_string()).unwrap_or_else(|| "-".into())) }
                            td {
                                @for (set, why) in w.cannot_follow.iter().filter(|(set, _)| target.is_none_or(|t| t == set.as_str())) {
                                    span.state.failed { (set) } " " (why) " "
                                }
                                @if !w.reported { span.muted { "never reported" } }
                            }
                            td { @if let Some(why) = &w.demoted_reason { (why) } }
                        }
                    }
                }
            } }
        }
    }
}

/// A preflight: what blocks the switch, then the replicas and workers that
/// would move, and the confirmation when nothing blocks it.
pub fn preflight(session: &Session, switch: &Switch, p: &Preflight) -> Markup {
    let target = switch.target();
    let force = switch.force();
    let only_workers = !p.blockers.is_empty()
        && p.blockers
            .iter()
            .all(|b| b.code == switchyard_protocol::carrier::blockers::WORKER_CANNOT_FOLLOW);
    html! {
        p { a href="/console/carrier" { "Back to the carrier" } }
        section.panel.preflight aria-labelledby="preflight-title" {
            h2 #preflight-title { "Preflight" }
            @if p.ok {
                p.flash.ok role="status" { "Nothing blocks the switch from " (p.report.carrier.as_deref().unwrap_or("?")) " to " (target) "." }
            } @else {
                div.flash.error role="alert" {
                    p { "The switch to " (target) " is blocked:" }
                    ul.blockers {
                        @for b in &p.blockers {
                            li { code { (b.code) } " " (b.message) }
                        }
                    }
                }
                @if only_workers && !force {
                    p.hint { "Only workers block it: go back and check again with Force to switch anyway (those workers are demoted until they can follow)." }
                }
            }
        }
        section.panel aria-labelledby="confirm-title" {
            h2 #confirm-title { "Live replicas that would switch" }
            p.hint { "Each builds " (target) " beside the active set, then swaps when the leader commits; calls in flight finish where they began." }
            (replicas(&p.report.replicas, Some(target)))
            h2 { "Workers that would follow" }
            (workers(&p.report.workers, Some(target)))
            @if p.ok {
                form.inline method="post" action="/console/carrier/switch" {
                    (csrf_field(session))
                    input type="hidden" name="target" value=(target);
                    @if force { input type="hidden" name="force" value="1"; }
                    @if !switch.versions().is_empty() { input type="hidden" name="versions" value=(switch.versions()); }
                    button.danger type="submit" { "Switch to " (target) " now" }
                    a href="/console/carrier" { "Cancel" }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use switchyard_protocol::carrier::ChangeRecord;

    use super::*;
    use switchyard_server::auth::Caller;

    fn session() -> Session {
        Session {
            caller: Caller {
                key_id: "k1".into(),
                scopes: vec!["admin".into()],
                team: None,
            },
            csrf: "t".into(),
            flash: None,
            path: "/console/carrier".into(),
            secure: false,
            remote: None,
        }
    }

    fn at(state: CarrierRowState, outcome: Option<&str>) -> CarrierStatus {
        CarrierStatus {
            carrier: Some("tunnel".into()),
            state: Some(state),
            target: (state == CarrierRowState::Prepare).then(|| "nats".into()),
            draining: (state == CarrierRowState::Commit).then(|| "nats".into()),
            last_change: Some(ChangeRecord {
                id: 1,
                from: "nats".into(),
                to: "tunnel".into(),
                outcome: outcome.map(str::to_string),
                reason: (outcome == Some("aborted")).then(|| "aborted by key k1".into()),
                ..ChangeRecord::default()
            }),
            ..CarrierStatus::default()
        }
    }

    #[test]
    fn a_change_in_prepare_is_drawn_at_prepare_and_keeps_being_asked_for() {
        let html = phases(&session(), &at(CarrierRowState::Prepare, None)).into_string();
        assert!(
            html.contains(r#"<li class="current" aria-current="step">prepare…</li>"#),
            "{html}"
        );
        assert!(!html.contains("data-final"), "{html}");
        assert!(html.contains("Replicas ready"), "{html}");
        assert!(html.contains("Abort the change"), "{html}");
    }

    #[test]
    fn a_committed_change_drains() {
        let html = phases(&session(), &at(CarrierRowState::Commit, None)).into_string();
        assert!(html.contains(r#"<li class="done">commit ✓</li>"#), "{html}");
        assert!(
            html.contains(r#"aria-current="step">drain…</li>"#),
            "{html}"
        );
        assert!(!html.contains("data-final"), "{html}");
        assert!(!html.contains("Abort the change"), "{html}");
    }

    #[test]
    fn a_settled_or_aborted_change_is_final() {
        let settled =
            phases(&session(), &at(CarrierRowState::Stable, Some("settled"))).into_string();
        assert!(settled.contains("data-final"), "{settled}");
        assert!(
            settled.contains(r#"<li class="done">stable ✓</li>"#),
            "{settled}"
        );
        let aborted =
            phases(&session(), &at(CarrierRowState::Stable, Some("aborted"))).into_string();
        assert!(aborted.contains("data-final"), "{aborted}");
        assert!(aborted.contains("prepare: aborted"), "{aborted}");
        assert!(aborted.contains("aborted by key k1"), "{aborted}");
    }
}
