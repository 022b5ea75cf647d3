//! A grant's terms as a form (review access, share with a peer): the exact
//! operations, offered services, model revisions and machines, lifetime,
//! concurrent calls, request count, model byte allowance and
//! stop-on-revoke; and the form read back into the API's `GrantSpec`.

use maud::{Markup, html};
use switchyard_protocol::federation::{
    GrantSpec, MAX_GRANT_LIFETIME_S, Offer, Operation, Resource,
};

use super::super::api::ApiFailure;
use super::super::page;
use super::invalid;
use super::offers::Offers;

const DAY_S: i64 = 24 * 3600;
/// The longest lifetime the form offers, in days (the API's bound).
const MAX_DAYS: i64 = MAX_GRANT_LIFETIME_S / DAY_S;
/// The most concurrent calls the form takes (beyond, ask the API directly).
const MAX_CONCURRENT: u32 = 100_000;
/// The largest model byte allowance the form takes, in GiB (1 PiB).
const MAX_MODEL_GIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = (1u64 << 30) as f64;

/// The terms' fields, with `operations` checked to begin with.
pub fn fieldset(offers: &Result<Offers, ApiFailure>, operations: &[Operation]) -> Markup {
    html! {
        fieldset {
            legend { "Operations" }
            @for op in Operation::ALL {
                @let id = format!("grant-op-{}", op.as_str().replace(':', "-"));
                span.check {
                    input #(id) type="checkbox" name="operation" value=(op.as_str()) checked[operations.contains(op)];
                    " " label for=(id) { (op.as_str()) }
                }
                " "
            }
            p.hint { "Delegating an operation needs its own scope too: inference, nodes:manage for inference:manage, models:manage for models:transfer." }
        }
        @match offers {
            Err(failure) => { (page::failure(failure)) }
            Ok(offers) => {
                (resources("Services", "service", &offers.offers, |r| matches!(r, Resource::Service { .. })))
                (resources("Model revisions", "model", &offers.offers, |r| matches!(r, Resource::Model { .. })))
                (resources("Machines", "machine", &offers.offers, |r| matches!(r, Resource::Machine { .. })))
            }
        }
        label for="grant-lifetime" { "Lifetime (days)" }
        input #grant-lifetime type="number" name="lifetime_days" min="1" max=(MAX_DAYS) value="30" required;
        label for="grant-concurrent" { "Concurrent calls" }
        input #grant-concurrent type="number" name="max_concurrent" min="1" max=(MAX_CONCURRENT) value="8" required;
        label for="grant-requests" { "Requests in all" }
        input #grant-requests type="number" name="max_requests" min="0" value="100000" required;
        label for="grant-bytes" { "Model bytes (GiB)" }
        input #grant-bytes type="number" name="max_model_gib" min="0" step="any" value="0" required;
        span.hint { "What copies of granted model revisions may move in all; repeated ranges count again." }
        span.check {
            input #grant-stop type="checkbox" name="stop_on_revoke" value="on";
            " " label for="grant-stop" { "Stop the services it creates when it is revoked" }
        }
    }
}

/// Checkboxes for the offers that `pick` keeps, by offer id.
fn resources(
    title: &str,
    field: &str,
    offers: &[Offer],
    pick: impl Fn(&Resource) -> bool,
) -> Markup {
    let chosen: Vec<&Offer> = offers.iter().filter(|o| pick(&o.resource)).collect();
    html! {
        fieldset {
            legend { (title) }
            @if chosen.is_empty() {
                span.muted { "none offered: publish one on " a href="/console/federation/offers" { "Offers" } }
            }
            @for (i, offer) in chosen.iter().enumerate() {
                @let id = format!("grant-{field}-{i}");
                span.check {
                    input #(id) type="checkbox" name=(field) value=(offer.id);
                    " " label for=(id) { (offer.id) }
                }
                " "
            }
        }
    }
}

/// The posted terms as the API takes them (`peer` when sharing unprompted).
pub fn read(fields: &[(String, String)], peer: Option<String>) -> Result<GrantSpec, ApiFailure> {
    let all = |name: &str| -> Vec<String> {
        fields
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect()
    };
    let one = |name: &str| -> String {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let operations = all("operation")
        .iter()
        .map(|op| {
            op.parse::<Operation>()
                .map_err(|_| invalid(format!("no operation '{op}'")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if operations.is_empty() {
        return Err(invalid("choose at least one operation"));
    }
    let days: i64 = one("lifetime_days")
        .parse()
        .ok()
        .filter(|d| (1..=MAX_DAYS).contains(d))
        .ok_or_else(|| invalid(format!("the lifetime is 1 to {MAX_DAYS} days")))?;
    let max_concurrent: u32 = one("max_concurrent")
        .parse()
        .ok()
        .filter(|n| (1..=MAX_CONCURRENT).contains(n))
        .ok_or_else(|| invalid(format!("concurrent calls are 1 to {MAX_CONCURRENT}")))?;
    let max_requests: u64 = one("max_requests")
        .parse()
        .map_err(|_| invalid("requests in all is a whole number"))?;
    let gib: f64 = one("max_model_gib")
        .parse()
        .ok()
        .filter(|g: &f64| g.is_finite() && (0.0..=MAX_MODEL_GIB).contains(g))
        .ok_or_else(|| invalid(format!("model bytes are 0 to {MAX_MODEL_GIB} GiB")))?;
    Ok(GrantSpec {
        peer,
        operations,
        services: all("service"),
        models: all("model"),
        machines: all("machine"),
        lifetime_s: days * DAY_S,
        max_concurrent,
        max_requests,
        max_model_bytes: (gib * GIB).round() as u64,
        stop_on_revoke: one("stop_on_revoke") == "on",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_form_reads_into_exact_terms() {
        let spec = read(
            &pairs(&[
                ("csrf", "x"),
                ("operation", "inference"),
                ("operation", "models:transfer"),
                ("service", "chat"),
                ("model", "llama@q4"),
                ("lifetime_days", "30"),
                ("max_concurrent", "8"),
                ("max_requests", "1000"),
                ("max_model_gib", "1.5"),
            ]),
            Some("beta".into()),
        )
        .unwrap();
        assert_eq!(
            spec.operations,
            [Operation::Inference, Operation::ModelsTransfer]
        );
        assert_eq!(spec.services, ["chat"]);
        assert_eq!(spec.models, ["llama@q4"]);
        assert!(spec.machines.is_empty());
        assert_eq!(spec.lifetime_s, 30 * DAY_S);
        assert_eq!(spec.max_model_bytes, 3 << 29);
        assert!(!spec.stop_on_revoke);
        assert_eq!(spec.peer.as_deref(), Some("beta"));
    }

    #[test]
    fn a_lifetime_beyond_a_year_is_refused_before_the_api() {
        let failure = read(
            &pairs(&[
                ("operation", "inference"),
                ("lifetime_days", "400"),
                ("max_concurrent", "8"),
                ("max_requests", "1"),
                ("max_model_gib", "0"),
            ]),
            None,
        )
        .unwrap_err();
        assert_eq!(failure.code, "invalid_request");
        assert!(failure.message.contains("365"), "{}", failure.message);
    }
}
