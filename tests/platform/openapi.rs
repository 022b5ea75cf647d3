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
        "/api/admission/{point}/decisions",
        "/readyz",
    ] {
        assert!(
            served.contains(&format!("\"{route}\"")),
            "{route} is documented"
        );
    }
}

#[test]
fn the_document_lists_security_and_every_error_status() {
    let doc: serde_json::Value =
        serde_json::from_str(&switchyard_server::openapi::document()).unwrap();
    // No blanket security: public routes need none, others name theirs.
    assert!(doc.get("security").is_none(), "no document-wide security");
    for public in ["/healthz", "/readyz"] {
        let op = &doc["paths"][public]["get"];
        assert!(op["security"].is_null(), "{public} needs no credential");
        assert!(
            op["responses"].get("401").is_none(),
            "{public} never answers 401"
        );
    }
    // The federation link is authenticated by its key handshake alone.
    let link = &doc["paths"]["/api/federation/link"]["get"];
    assert!(link["security"].is_null(), "the link takes no credential");
    assert!(link["responses"].get("401").is_none(), "{link}");
    // A secured JSON route lists the statuses a client can meet.
    let keys = &doc["paths"]["/api/keys"]["post"];
    assert_eq!(keys["security"][0]["bearer"], serde_json::json!([]));
    for status in ["400", "401", "403", "413", "415", "422", "503"] {
        assert!(
            keys["responses"].get(status).is_some(),
            "POST /api/keys documents {status}"
        );
        assert_eq!(
            keys["responses"][status]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorBody"
        );
    }
    // The relay between replicas is documented, with its own secret.
    let relay = &doc["paths"]["/api/cluster/relay"]["get"];
    assert_eq!(relay["security"][0]["relay_secret"], serde_json::json!([]));
    assert_eq!(
        doc["components"]["securitySchemes"]["relay_secret"]["in"],
        "header"
    );
}
