//! What the admission pages read from the API, parsed once into types, and
//! how they are drawn: a chain, the replicas that follow it, the decision
//! log.

use maud::{Markup, html};
use serde_json::Value;
use switchyard_protocol::decisions::{DecisionLog, RecordedDecision};
use switchyard_protocol::generations::{BoundComponent, ChainStatus, ReplicaStatus};

use super::super::page;

/// `model-allowlist 1.0.0 (enforce) → max-tokens 1.0.0 (monitor)`.
pub fn chain_summary(chain: &ChainStatus) -> Markup {
    html! {
        @if chain.policies.is_empty() {
            span.muted { "empty: everything is allowed" }
        } @else {
            @for (i, p) in chain.policies.iter().map(|p| &p.component).enumerate() {
                @if i > 0 { " → " }
                code { (p.plugin) " " (p.version) } " "
                span class=(format!("state {}", mode_class(p.mode.as_str()))) { (p.mode) }
            }
        }
    }
}

/// `2 of 2 current`, or who is behind or failed.
pub fn replicas_summary(replicas: &[ReplicaStatus]) -> Markup {
    let current = replicas.iter().filter(|r| r.status == "current").count();
    let failed = replicas.iter().filter(|r| r.status == "failed").count();
    html! {
        span class=(if current == replicas.len() { "state ok" } else { "state pending" }) {
            (current) " of " (replicas.len()) " current"
        }
        @if failed > 0 { " " span.state.failed { (failed) " failed" } }
    }
}

/// The chain at its generation, policy by policy.
pub fn chain_panel(chain: &ChainStatus) -> Markup {
    html! {
        section.panel aria-labelledby="chain-title" {
            h2 #chain-title { "Chain at generation " (chain.generation) }
            @if chain.generation > 0 {
                p.muted {
                    (chain.note) " · by " code { (chain.created_by) }
                    @if let Some(at) = &chain.created_at { " · " (at) }
                }
            }
            @for warning in &chain.trust_warnings {
                p.flash.warn role="status" { (warning) }
            }
            @if chain.policies.is_empty() {
                (page::empty("This point's chain is empty: every request is allowed.", html! {
                    "Bind a policy with the form below (upload one on the " a href="/console/plugins" { "Plugins" } " page first)."
                }))
            } @else {
                div.table-wrap { table {
                    thead { tr {
                        th { "#" } th { "Policy" } th { "Mode" } th { "On error" }
                        th { "Settings" } th { "Decision log" } th { "Signature" }
                    } }
                    tbody {
                        @for (i, signed) in chain.policies.iter().enumerate() {
                            @let p = &signed.component;
                            tr {
                                td { (i + 1) }
                                td { code { (p.plugin) " " (p.version) } br;
                                     span.muted title=(p.sha256) { (p.sha256.get(..12).unwrap_or(&p.sha256)) "…" } }
                                td { span class=(format!("state {}", mode_class(p.mode.as_str()))) { (p.mode) } }
                                td { (fail_words(p.fail.as_str())) }
                                td { code.settings { (compact(&p.settings)) } }
                                td { (logging_words(p)) }
                                td { (super::super::plugins::signature(&signed.signature)) }
                            }
                        }
                    }
                } }
            }
        }
    }
}

/// Every replica and the generation it serves.
pub fn replicas_table(chain: &ChainStatus) -> Markup {
    html! {
        @if chain.replicas.is_empty() {
            (page::empty("No replica has reported in the last 30 seconds.", html! {
                "A replica reports while it runs; start one with " code { "switchyard serve" } "."
            }))
        } @else {
            p { (replicas_summary(&chain.replicas)) " at generation " (chain.generation) }
            div.table-wrap { table {
                thead { tr { th { "Replica" } th { "Host" } th { "Serves generation" } th { "Status" } th { "Why" } } }
                tbody {
                    @for r in &chain.replicas {
                        tr {
                            td { code { (r.instance) } }
                            td { (r.hostname) }
                            td { (r.generation) }
                            td { span class=(format!("state {}", status_class(&r.status))) { (r.status) } }
                            td {
                                @if let Some(error) = &r.error {
                                    @if let Some(g) = r.failed_generation { "generation " (g) ": " }
                                    (error)
                                }
                            }
                        }
                    }
                }
            } }
        }
    }
}

/// The newest records of the decision log, with the counts.
pub fn decisions_table(log: &DecisionLog) -> Markup {
    let c = &log.counts;
    html! {
        p.muted {
            (c.deny) " denied · " (c.patch) " patched · " (c.error) " failed · "
            (c.monitor) " monitor hits · " (c.allow) " allows (sampled)"
        }
        @if log.decisions.is_empty() {
            (page::empty("No decision recorded yet.", html! {
                "Denials, patches, errors and a sample of allows are recorded as requests arrive; the dry run below records nothing."
            }))
        } @else {
            div.table-wrap { table {
                thead { tr {
                    th { "When" } th { "Policy" } th { "Decision" } th { "Code" }
                    th { "Key" } th { "Generation" } th { "Replica" }
                } }
                tbody {
                    // Newest first: the log lists them oldest first.
                    @for d in log.decisions.iter().rev() {
                        tr {
                            td { (d.at) }
                            td { code { (d.plugin) " " (d.version) } }
                            td {
                                span class=(format!("state {}", decision_class(d.decision))) { (d.decision.as_str()) }
                                @if d.monitor { " " span.muted { "(monitor: not enforced)" } }
                            }
                            td { @if let Some(code) = &d.code { code { (code) } } }
                            td { code { (d.key_id) } }
                            td { (d.generation) }
                            td { code { (d.replica) } }
                        }
                    }
                }
            } }
        }
    }
}

fn compact(settings: &Value) -> String {
    serde_json::to_string(settings).unwrap_or_default()
}

fn fail_words(fail: &str) -> &'static str {
    if fail == "open" {
        "allow (fails open)"
    } else {
        "deny (fails closed)"
    }
}

fn logging_words(p: &BoundComponent) -> String {
    let sample = match p.log.allow_sample {
        0 => "no allows".to_string(),
        1 => "every allow".to_string(),
        n => format!("1 allow in {n}"),
    };
    if p.log.log_requests {
        format!("{sample}, with requests")
    } else {
        sample
    }
}

fn mode_class(mode: &str) -> &'static str {
    if mode == "monitor" {
        "pending"
    } else {
        "active"
    }
}

fn status_class(status: &str) -> &'static str {
    match status {
        "current" => "ok",
        "failed" => "failed",
        _ => "pending",
    }
}

/// The stylesheet's class for a decision (`allow`, `deny`, ...).
pub fn decision_class(decision: RecordedDecision) -> &'static str {
    match decision {
        RecordedDecision::Allow => "allow",
        RecordedDecision::Deny | RecordedDecision::Error | RecordedDecision::Throttle => "deny",
        RecordedDecision::Patch | RecordedDecision::Flag => "pending",
    }
}
