//! The committed OpenAPI document matches what the server serves.
//! Regenerate with `UPDATE_OPENAPI=1 cargo test -p switchyard-tests --test platform openapi`.

use std::path::PathBuf;

#[test]
fn committed_openapi_document_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
    let served = switchyard_server::openapi::document();
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &served).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == served,
        "docs/openapi.json is stale; regenerate it with UPDATE_OPENAPI=1 cargo test -p switchyard-tests --test platform openapi"
    );
    for route in [
        "/api/plugins",
        "/api/admission/{point}",
        "/api/admission/{point}/evaluate",
        "/readyz",
    ] {
        assert!(
            served.contains(&format!("\"{route}\"")),
            "{route} is documented"
        );
    }
}
