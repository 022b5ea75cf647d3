//! Grant evaluators through the real host: the `grant-evaluator` fixture
//! (`tests/fixtures/grant-evaluator`), built for wasm32-wasip2, loaded by
//! the same loader as policies and carriers.

use std::sync::Arc;

use switchyard_runtime::grant::{
    Charge, FederatedCall, Grant, GrantDecision, GrantPlugin, GrantSource, Usage,
};
use switchyard_runtime::loader::ComponentSource;
use switchyard_runtime::{LoadError, Runtime, RuntimeConfig};
use switchyard_tests::plugins::{component, sha256};

/// Loads the built component `name` as a grant evaluator.
fn load_as_grant(
    runtime: &Arc<Runtime>,
    name: &str,
    settings: &str,
) -> Result<Arc<GrantPlugin>, LoadError> {
    let bytes = component(name);
    let component = ComponentSource {
        name,
        version: "test",
        bytes: &bytes,
        sha256: &sha256(&bytes),
    };
    GrantPlugin::load(
        runtime,
        GrantSource {
            component,
            settings,
        },
    )
}

fn load(runtime: &Arc<Runtime>, settings: &str) -> Result<Arc<GrantPlugin>, LoadError> {
    load_as_grant(runtime, "grant-evaluator", settings)
}

fn grant() -> Grant {
    Grant {
        id: "g1".into(),
        peer: "acme".into(),
        operations: vec!["inference".into()],
        services: vec!["chat".into()],
        models: vec!["demo-tiny@main".into()],
        machines: Vec::new(),
        expires_at_unix_ms: u64::MAX,
        max_concurrent: 4,
        max_requests: 100,
        max_model_bytes: 0,
    }
}

fn call(peer: &str, model: &str) -> FederatedCall {
    FederatedCall {
        peer: peer.into(),
        operation: "inference".into(),
        service: Some("chat".into()),
        model: Some(format!("{model}@main")),
        machines: Vec::new(),
        model_bytes: 0,
        tokens: 64,
    }
}

fn usage(requests: u64) -> Usage {
    Usage {
        concurrent: 0,
        requests,
        model_bytes: 0,
    }
}

fn denial_code(decision: GrantDecision) -> Option<String> {
    match decision {
        GrantDecision::Inside(_) => None,
        GrantDecision::Outside(denial) => Some(denial.code),
    }
}

#[test]
fn a_grant_evaluator_component_loads_and_judges_calls() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let evaluator = load(&runtime, "{}").expect("the grant evaluator loads");
    assert_eq!(&**evaluator.label(), "grant-evaluator@test");
    let judge = |call: &FederatedCall, used: u64| {
        denial_code(
            evaluator
                .evaluate(call, &grant(), usage(used))
                .expect("a call"),
        )
    };
    assert_eq!(judge(&call("acme", "demo-tiny"), 0), None);
    // Inside, the evaluator says what the call costs; the host charges it.
    assert_eq!(
        evaluator
            .evaluate(&call("acme", "demo-tiny"), &grant(), usage(0))
            .unwrap(),
        GrantDecision::Inside(Charge {
            requests: 1,
            concurrent: 1,
            model_bytes: 0,
            tokens: 64
        })
    );
    assert_eq!(
        judge(&call("acme", "demo-large"), 0).as_deref(),
        Some("model_not_granted")
    );
    assert_eq!(
        judge(&call("acme", "demo-tiny"), 100).as_deref(),
        Some("requests_exhausted")
    );
    assert_eq!(
        judge(&call("globex", "demo-tiny"), 0).as_deref(),
        Some("wrong_peer")
    );
    // Its calls are counted like a policy's: validate-settings and five
    // evaluations, three of them outside.
    let counts = runtime.metrics().plugin("grant-evaluator", "test").counts();
    assert_eq!((counts.calls, counts.denials, counts.errors), (6, 3, 0));
}

#[test]
fn a_grant_evaluator_refuses_bad_settings_at_load() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    match load(&runtime, r#"{"deny": true}"#) {
        Err(LoadError::InvalidSettings(message)) => {
            assert!(message.contains("unknown field `deny`"), "{message}")
        }
        other => panic!("expected invalid settings, got {other:?}"),
    }
    let strict = load(&runtime, r#"{"deny_peers": ["acme"]}"#).expect("loads");
    let decision = strict.evaluate(&call("acme", "demo-tiny"), &grant(), usage(0));
    assert_eq!(
        denial_code(decision.unwrap()).as_deref(),
        Some("peer_denied")
    );
}

#[test]
fn a_policy_is_not_loaded_as_a_grant_evaluator() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let err = load_as_grant(&runtime, "max-tokens", "{}").unwrap_err();
    assert!(matches!(err, LoadError::WrongKind(_)), "{err}");
    assert!(err.to_string().contains("not a grant evaluator"), "{err}");
}

#[test]
fn the_shipped_grant_standard_judges_and_charges_through_the_host() {
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let standard = load_as_grant(&runtime, "grant-standard", "{}").expect("grant-standard loads");
    let evaluate = |call: &FederatedCall, grant: &Grant, usage: Usage| {
        standard.evaluate(call, grant, usage).expect("a call")
    };
    let mut grant = grant();
    grant.operations.push("models:transfer".into());
    grant.max_model_bytes = 1000;
    assert_eq!(
        evaluate(&call("acme", "demo-tiny"), &grant, usage(0)),
        GrantDecision::Inside(Charge {
            requests: 1,
            concurrent: 1,
            model_bytes: 0,
            tokens: 64
        })
    );
    let transfer = FederatedCall {
        operation: "models:transfer".into(),
        service: None,
        model_bytes: 600,
        tokens: 0,
        ..call("acme", "demo-tiny")
    };
    assert_eq!(
        evaluate(&transfer, &grant, usage(0)),
        GrantDecision::Inside(Charge {
            requests: 0,
            concurrent: 0,
            model_bytes: 600,
            tokens: 0
        })
    );
    let used = Usage {
        model_bytes: 600,
        ..usage(0)
    };
    assert_eq!(
        denial_code(evaluate(&transfer, &grant, used)).as_deref(),
        Some("model_bytes_exhausted")
    );
    let manage = FederatedCall {
        operation: "inference:manage".into(),
        ..call("acme", "demo-tiny")
    };
    assert_eq!(
        denial_code(evaluate(&manage, &grant, usage(0))).as_deref(),
        Some("operation_not_granted")
    );
    // The rules run on the host's clock: a grant that expired is outside.
    grant.expires_at_unix_ms = 1;
    assert_eq!(
        denial_code(evaluate(&call("acme", "demo-tiny"), &grant, usage(0))).as_deref(),
        Some("grant_expired")
    );

    let capped =
        load_as_grant(&runtime, "grant-standard", r#"{"max_tokens_per_call": 32}"#).expect("loads");
    assert_eq!(
        denial_code(
            capped
                .evaluate(&call("acme", "demo-tiny"), &self::grant(), usage(0))
                .unwrap()
        )
        .as_deref(),
        Some("tokens_over_limit")
    );
    match load_as_grant(&runtime, "grant-standard", r#"{"max_tokens_per_call": 0}"#) {
        Err(LoadError::InvalidSettings(message)) => {
            assert_eq!(message, "max_tokens_per_call must be at least 1, got 0")
        }
        other => panic!("expected invalid settings, got {other:?}"),
    }
}
