use super::*;

#[derive(Debug, thiserror::Error)]
#[error("db error")]
struct Driver(#[source] Database);

#[derive(Debug, thiserror::Error)]
#[error("ERROR: new row violates check constraint \"plugins_kind_check\"")]
struct Database;

#[derive(Debug, thiserror::Error)]
#[error("database error: {0}")]
struct Wrapper(#[source] Driver);

#[test]
fn the_log_keeps_every_cause_once() {
    assert_eq!(
        chain(&Wrapper(Driver(Database))),
        "database error: db error: ERROR: new row violates check constraint \"plugins_kind_check\""
    );
}

#[test]
fn each_domain_error_has_its_status_and_code() {
    use crate::auth::AuthError;
    use switchyard_binding::admission::AdmissionError;
    use switchyard_binding::bound::BindError;
    use switchyard_binding::grant_evaluator::EvaluatorError;
    use switchyard_library::{LibraryError, PeerFetchError};
    use switchyard_protocol::valid::ValidError;
    use switchyard_runtime::PluginKind;
    use switchyard_runtime::admission::AdmissionPoint;

    let plugin = || ("p".to_string(), "1".to_string());
    let load = |source| BindError::Load {
        plugin: plugin().0,
        version: plugin().1,
        source,
    };
    let cases: Vec<(ApiError, StatusCode, &str)> = vec![
        (
            ValidError::Name("id".into()).into(),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            AuthError::MissingKey.into(),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            AuthError::UnknownKey.into(),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            AuthError::NodeUnauthorized.into(),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            AuthError::NotAReplica("x").into(),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            AuthError::MissingScope(crate::auth::MissingScope("admin".into())).into(),
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            AuthError::Lookup(StoreError::NotFound("key".into())).into(),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            AuthError::NodeLookup(StoreError::Corrupt("x".into())).into(),
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
        ),
        (
            AdmissionError::UnknownPoint("x".into()).into(),
            StatusCode::NOT_FOUND,
            "unknown_point",
        ),
        (
            BindError::PluginNotFound {
                plugin: plugin().0,
                version: plugin().1,
            }
            .into(),
            StatusCode::NOT_FOUND,
            "plugin_not_found",
        ),
        (
            BindError::WrongKind {
                plugin: plugin().0,
                version: plugin().1,
                kind: PluginKind::Carrier,
                wanted: PluginKind::Policy,
            }
            .into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "wrong_kind",
        ),
        (
            AdmissionError::PointNotSupported {
                policy: "p@1".into(),
                judges: "deploy".into(),
                point: AdmissionPoint::Inference,
            }
            .into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "point_not_supported",
        ),
        (
            AdmissionError::NoGeneration(AdmissionPoint::Deploy).into(),
            StatusCode::CONFLICT,
            "nothing_to_rollback",
        ),
        (
            AdmissionError::EmptyChainActive(AdmissionPoint::Deploy).into(),
            StatusCode::CONFLICT,
            "nothing_to_rollback",
        ),
        (
            BindError::NotOlder {
                newest: 3,
                target: 3,
            }
            .into(),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            BindError::UnknownGeneration {
                slot: "deploy".into(),
                generation: 9,
            }
            .into(),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            load(LoadError::InvalidSettings("max_tokens must be set".into())).into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_settings",
        ),
        (
            load(LoadError::Compile("x".into())).into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "compile_failed",
        ),
        (
            AdmissionError::Bind(load(LoadError::InvalidSettings("x".into()))).into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_settings",
        ),
        (
            EvaluatorError::NoShipped.into(),
            StatusCode::CONFLICT,
            "no_evaluator",
        ),
        (
            EvaluatorError::NothingToRollback("none").into(),
            StatusCode::CONFLICT,
            "nothing_to_rollback",
        ),
        (
            LibraryError::TooLarge { limit: 1 }.into(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
        (
            LibraryError::Upload("cut".into()).into(),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            PeerFetchError::NoPeer("ab".into()).into(),
            StatusCode::SERVICE_UNAVAILABLE,
            "blob_unavailable",
        ),
    ];
    for (error, status, code) in cases {
        assert_eq!(
            (error.status, error.code),
            (status, code),
            "{}",
            error.message
        );
    }
}

#[test]
fn a_policys_load_error_names_it_unless_the_plugin_speaks() {
    use switchyard_binding::bound::BindError;
    let load = |source| -> ApiError {
        BindError::Load {
            plugin: "max-tokens".into(),
            version: "1.0.0".into(),
            source,
        }
        .into()
    };
    assert_eq!(
        load(LoadError::Compile("bad".into())).message,
        "max-tokens@1.0.0: compile failed: bad"
    );
    // The plugin's own words, to whoever wrote the settings.
    assert_eq!(
        load(LoadError::InvalidSettings("max_tokens must be set".into())).message,
        "max_tokens must be set"
    );
}

#[test]
fn a_clients_bad_input_is_never_a_500() {
    for (sqlstate, status) in [
        ("23505", StatusCode::CONFLICT),
        ("23503", StatusCode::CONFLICT),
        ("23514", StatusCode::BAD_REQUEST),
        ("22P05", StatusCode::BAD_REQUEST),
        ("22021", StatusCode::BAD_REQUEST),
        ("22003", StatusCode::BAD_REQUEST),
    ] {
        assert_eq!(
            client_fault(sqlstate).map(|f| f.0),
            Some(status),
            "{sqlstate}"
        );
    }
    // A deadlock or a lost connection is the system's, not the client's.
    assert!(client_fault("40P01").is_none());
    assert!(client_fault("08006").is_none());
}
