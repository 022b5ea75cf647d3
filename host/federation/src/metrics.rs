//! Federation's Prometheus series: the identity, each link, calls and
//! denials per grant, and what each grant this cluster owns has left.
//! Labels are bounded by the metadata bounds (128 peers, 256 grants) and
//! the evaluator's codes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use switchyard_protocol::federation::{Direction, LinkState};

use crate::Federation;
use crate::identity::IdentityState;

/// The calls this replica judged, by grant and outcome (`admitted` or the
/// refusal's code).
#[derive(Debug, Default)]
pub struct CallCounts(Mutex<BTreeMap<(String, String), u64>>);

impl CallCounts {
    /// Counts one call.
    pub fn count(&self, grant: &str, outcome: &str) {
        // An evaluator's code is its own: bounded here, not trusted.
        let outcome: String = outcome.chars().take(64).collect();
        *self
            .0
            .lock()
            .expect("counts lock")
            .entry((grant.to_string(), outcome))
            .or_default() += 1;
    }
}

/// A label value, escaped as the exposition format wants.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Federation {
    /// Appends federation's series to `out`; the ones read from the
    /// database are left out when it does not answer.
    pub async fn render_metrics(&self, out: &mut String) {
        let name = "switchyard_federation_identity_verified";
        let _ = writeln!(
            out,
            "# HELP {name} 1 when this replica's cluster key is the cluster's.\n# TYPE {name} gauge\n{name} {}",
            u8::from(self.cluster.state() == IdentityState::Verified)
        );
        let name = "switchyard_federation_calls_total";
        let _ = writeln!(
            out,
            "# HELP {name} Federated calls this replica judged, by grant and outcome.\n# TYPE {name} counter"
        );
        for ((grant, outcome), n) in self.calls.0.lock().expect("counts lock").iter() {
            let _ = writeln!(
                out,
                "{name}{{grant=\"{}\",outcome=\"{}\"}} {n}",
                escape(grant),
                escape(outcome)
            );
        }
        let Ok(peers) = self.store.peers().await else {
            return;
        };
        let name = "switchyard_federation_link_up";
        let _ = writeln!(
            out,
            "# HELP {name} 1 when the link to the peer is up (on any replica).\n# TYPE {name} gauge"
        );
        for peer in &peers {
            let up = u8::from(peer.link.state == LinkState::Up);
            let _ = writeln!(out, "{name}{{peer=\"{}\"}} {up}", escape(&peer.label));
        }
        let name = "switchyard_federation_link_held";
        let _ = writeln!(
            out,
            "# HELP {name} 1 when this replica holds the link to the peer (others relay through it).\n# TYPE {name} gauge"
        );
        for peer in &peers {
            let held = u8::from(self.links.is_up(&peer.id));
            let _ = writeln!(out, "{name}{{peer=\"{}\"}} {held}", escape(&peer.label));
        }
        let Ok(grants) = self.store.grants().await else {
            return;
        };
        let name = "switchyard_federation_quota_left";
        let _ = writeln!(
            out,
            "# HELP {name} What each grant this cluster owns has left, by limit.\n# TYPE {name} gauge"
        );
        for grant in grants.iter().filter(|g| g.direction == Direction::Outgoing) {
            let terms = &grant.terms;
            let usage = &grant.usage;
            for (limit, left) in [
                (
                    "requests",
                    terms.max_requests.saturating_sub(usage.requests),
                ),
                (
                    "concurrent",
                    u64::from(terms.max_concurrent.saturating_sub(usage.in_flight)),
                ),
                (
                    "model_bytes",
                    terms.max_model_bytes.saturating_sub(usage.model_bytes),
                ),
            ] {
                let _ = writeln!(
                    out,
                    "{name}{{grant=\"{}\",peer=\"{}\",limit=\"{limit}\"}} {left}",
                    escape(&grant.id),
                    escape(&grant.peer)
                );
            }
        }
    }
}
