//! The rules, in the order the crate docs list them.

use switchyard_sdk::grant::{Charge, FederatedCall, Grant, GrantDecision, Usage};

use crate::Settings;

/// What `call` costs its grant when it is inside; `None` for an operation
/// this evaluator does not know.
pub fn charge(call: &FederatedCall) -> Option<Charge> {
    let (requests, concurrent, model_bytes) = match call.operation.as_str() {
        "inference" => (1, 1, 0),
        "inference:manage" => (1, 0, 0),
        "models:transfer" => (0, 0, call.model_bytes),
        _ => return None,
    };
    Some(Charge {
        requests,
        concurrent,
        model_bytes,
        tokens: call.tokens,
    })
}

/// Judges `call` against `grant` at `now_unix_ms`.
pub fn evaluate(
    settings: &Settings,
    call: &FederatedCall,
    grant: &Grant,
    usage: &Usage,
    now_unix_ms: u64,
) -> GrantDecision {
    match judge(settings, call, grant, usage, now_unix_ms) {
        Ok(charge) => GrantDecision::Inside(charge),
        Err((code, message)) => GrantDecision::outside(code, message),
    }
}

type Outside = (&'static str, String);

fn judge(
    settings: &Settings,
    call: &FederatedCall,
    grant: &Grant,
    usage: &Usage,
    now_unix_ms: u64,
) -> Result<Charge, Outside> {
    let id = &grant.id;
    if settings.deny_peers.contains(&call.peer) {
        return Err((
            "peer_denied",
            format!("peer {} is denied by the evaluator's settings", call.peer),
        ));
    }
    if call.peer != grant.peer {
        return Err(("wrong_peer", format!("grant {id} is not {}'s", call.peer)));
    }
    if now_unix_ms >= grant.expires_at_unix_ms {
        return Err(("grant_expired", format!("grant {id} has expired")));
    }
    let Some(charge) = charge(call) else {
        return Err((
            "unknown_operation",
            format!(
                "operation {:?} is none of inference, inference:manage, models:transfer",
                call.operation
            ),
        ));
    };
    if !grant.operations.contains(&call.operation) {
        return Err((
            "operation_not_granted",
            format!("grant {id} does not allow {}", call.operation),
        ));
    }
    listed(id, "service", call.service.as_ref(), &grant.services)?;
    listed(id, "model", call.model.as_ref(), &grant.models)?;
    for machine in &call.machines {
        listed(id, "machine", Some(machine), &grant.machines)?;
    }
    if let Some(limit) = settings.max_tokens_per_call
        && call.tokens > limit
    {
        return Err((
            "tokens_over_limit",
            format!(
                "a call may ask at most {limit} tokens, this one asks {}",
                call.tokens
            ),
        ));
    }
    room(id, &charge, usage, grant)?;
    Ok(charge)
}

/// `asked` (when the call names one) must be in `granted`.
fn listed(id: &str, what: &str, asked: Option<&String>, granted: &[String]) -> Result<(), Outside> {
    match asked {
        Some(asked) if !granted.contains(asked) => Err((
            match what {
                "service" => "service_not_granted",
                "model" => "model_not_granted",
                _ => "machine_not_granted",
            },
            format!("grant {id} does not cover {what} {asked}"),
        )),
        _ => Ok(()),
    }
}

/// The fast path: refuses a charge that would pass a limit `usage` shows
/// reached. Only what the call charges is looked at: a transfer is not
/// refused because the grant's concurrent slots are all taken.
fn room(id: &str, charge: &Charge, usage: &Usage, grant: &Grant) -> Result<(), Outside> {
    if charge.requests > 0 && usage.requests.saturating_add(charge.requests) > grant.max_requests {
        return Err((
            "requests_exhausted",
            format!("grant {id} allows {} requests", grant.max_requests),
        ));
    }
    if charge.concurrent > 0
        && usage.concurrent.saturating_add(charge.concurrent) > grant.max_concurrent
    {
        return Err((
            "concurrency_exhausted",
            format!("grant {id} allows {} calls at once", grant.max_concurrent),
        ));
    }
    if charge.model_bytes > 0
        && usage.model_bytes.saturating_add(charge.model_bytes) > grant.max_model_bytes
    {
        return Err((
            "model_bytes_exhausted",
            format!(
                "grant {id} allows {} model bytes, {} used, the call moves {}",
                grant.max_model_bytes, usage.model_bytes, charge.model_bytes
            ),
        ));
    }
    Ok(())
}
