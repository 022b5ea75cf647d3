//! The upload form: read as multipart by the console itself (the CSRF
//! token first, every field bounded), then pushed to `POST /api/plugins`
//! in-process as `switchyard plugin push` sends it.

use axum::body::Body;
use axum::extract::multipart::{Field, MultipartRejection};
use axum::extract::{Multipart, State};
use axum::http::{Method, Request, StatusCode, header};
use axum::response::Response;
use maud::html;
use serde_json::Value;
use sha2::{Digest, Sha256};
use switchyard_protocol::signing::{MAX_SIGNATURE_HEADER, PluginSignature, SIGNATURE_HEADER};

use super::super::ConsoleState;
use super::super::api::{ApiFailure, read_json};
use super::super::form::redirect_with;
use super::super::page::{self, Flash};
use super::super::session::{CSRF_FIELD, Session, form_urlencoded_component};
use super::{Entered, plugins_page, registry, unreadable};
use switchyard_server::routes::MAX_COMPONENT_BYTES;

/// The longest name or version read from the form (the API allows 64; a
/// longer one is refused by the API with its own message).
const MAX_TEXT_FIELD: usize = 256;

/// What the form carried, once read.
struct Upload {
    entered: Entered,
    file: Vec<u8>,
    signature: Option<Vec<u8>>,
}

/// Why the form could not be read: shown with a code, as the API's are.
struct FormRefusal {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl FormRefusal {
    fn invalid(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_request",
            message: message.into(),
        }
    }

    fn into_failure(self) -> ApiFailure {
        ApiFailure {
            status: self.status,
            code: self.code.into(),
            message: self.message,
            body: Value::Null,
        }
    }
}

/// The upload form's answer: back to the registry with the record shown,
/// or the page again with the refusal.
pub(super) async fn upload(
    State(console): State<ConsoleState>,
    session: Session,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    if let Err(forbidden) = session.require("admin") {
        return forbidden;
    }
    let Ok(mut multipart) = multipart else {
        return page::bad_request(&session, "the upload must be a multipart form");
    };
    // The token comes first: nothing else of the form is read without it.
    let token = match multipart.next_field().await {
        Ok(Some(field)) if field.name() == Some(CSRF_FIELD) => {
            read_limited(field, MAX_TEXT_FIELD).await.ok()
        }
        _ => None,
    };
    let token = token
        .and_then(|t| String::from_utf8(t).ok())
        .unwrap_or_default();
    if !session.csrf_matches(&token) {
        drain(&mut multipart).await;
        return page::csrf_refused(&session);
    }
    let upload = match read_upload(&mut multipart).await {
        Ok(upload) => upload,
        Err((refusal, entered)) => {
            drain(&mut multipart).await;
            return refused(&console, &session, refusal.into_failure(), &entered).await;
        }
    };
    let Upload {
        entered,
        file,
        signature,
    } = upload;
    let stored = push(&console, &session, &entered, file, signature.as_deref()).await;
    match stored {
        Ok((status, record)) => {
            let (name, version) = (&entered.name, &entered.version);
            let done = if status == StatusCode::CREATED {
                format!(
                    "Uploaded {name} {version} ({}).",
                    record["kind"].as_str().unwrap_or("component")
                )
            } else {
                format!("{name} {version} was already registered with these bytes.")
            };
            let to = format!(
                "/console/plugins?uploaded={}&version={}",
                form_urlencoded_component(name),
                form_urlencoded_component(version)
            );
            redirect_with(&session, &to, Flash::done(done))
        }
        Err(failure) => refused(&console, &session, failure, &entered).await,
    }
}

/// Reads what is left of a refused form and throws it away (the route's
/// body limit bounds it): answering while the browser still sends the file
/// would close the connection under it, and it would show a reset instead
/// of the refusal.
async fn drain(multipart: &mut Multipart) {
    while let Ok(Some(mut field)) = multipart.next_field().await {
        while let Ok(Some(_)) = field.chunk().await {}
    }
}

/// The page again, with the refusal above it and the fields refilled.
async fn refused(
    console: &ConsoleState,
    session: &Session,
    failure: ApiFailure,
    entered: &Entered,
) -> Response {
    let registry = registry(console, session).await;
    let body = html! {
        (page::failure(&failure))
        (plugins_page(session, &registry, entered))
    };
    page::render_status(session, failure.status, "Plugins", body)
}

/// The fields after the token, each bounded.
async fn read_upload(multipart: &mut Multipart) -> Result<Upload, (FormRefusal, Entered)> {
    let mut entered = Entered::default();
    let mut file = None;
    let mut signature = None;
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) => {
                let refusal = FormRefusal {
                    status: e.status(),
                    code: if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                        "payload_too_large"
                    } else {
                        "invalid_request"
                    },
                    message: format!("the form could not be read: {}", e.body_text()),
                };
                return Err((refusal, entered));
            }
        };
        let name = field.name().unwrap_or_default().to_string();
        let limit = match name.as_str() {
            "name" | "version" => MAX_TEXT_FIELD,
            "file" => MAX_COMPONENT_BYTES,
            "signature" => MAX_SIGNATURE_HEADER,
            _ => continue,
        };
        let bytes = match read_limited(field, limit).await {
            Ok(bytes) => bytes,
            Err(refusal) => return Err((refusal, entered)),
        };
        match name.as_str() {
            "name" => entered.name = String::from_utf8_lossy(&bytes).trim().to_string(),
            "version" => entered.version = String::from_utf8_lossy(&bytes).trim().to_string(),
            "file" => file = Some(bytes),
            // A file input left empty still sends an empty part.
            _ => signature = (!bytes.is_empty()).then_some(bytes),
        }
    }
    if entered.name.is_empty() || entered.version.is_empty() {
        return Err((
            FormRefusal::invalid("give the component's name and version"),
            entered,
        ));
    }
    match file {
        Some(file) if !file.is_empty() => Ok(Upload {
            entered,
            file,
            signature,
        }),
        _ => Err((FormRefusal::invalid("choose the component's file"), entered)),
    }
}

/// A field's bytes, refused past `limit`.
async fn read_limited(mut field: Field<'_>, limit: usize) -> Result<Vec<u8>, FormRefusal> {
    let what = field.name().unwrap_or("a field").to_string();
    let mut bytes = Vec::new();
    loop {
        match field.chunk().await {
            Ok(Some(chunk)) => {
                if bytes.len() + chunk.len() > limit {
                    return Err(FormRefusal {
                        status: StatusCode::PAYLOAD_TOO_LARGE,
                        code: "payload_too_large",
                        message: format!("{what} is larger than {}", page::bytes(limit as u64)),
                    });
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(bytes),
            Err(e) => {
                return Err(FormRefusal {
                    status: e.status(),
                    code: "invalid_request",
                    message: format!("{what} could not be read: {}", e.body_text()),
                });
            }
        }
    }
}

/// `POST /api/plugins` as the session's key, as the CLI sends it: the
/// answer's status (201 stored, 200 the same bytes again) and record.
async fn push(
    console: &ConsoleState,
    session: &Session,
    entered: &Entered,
    file: Vec<u8>,
    signature: Option<&[u8]>,
) -> Result<(StatusCode, Value), ApiFailure> {
    let sha256 = hex::encode(Sha256::digest(&file));
    let uri = format!(
        "/api/plugins?name={}&version={}&sha256={sha256}",
        form_urlencoded_component(&entered.name),
        form_urlencoded_component(&entered.version),
    );
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/wasm");
    if let Some(signature) = signature {
        let signature: PluginSignature =
            serde_json::from_slice(signature).map_err(|e| ApiFailure {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_signature".into(),
                message: format!(
                    "the signature file is not one `switchyard plugin sign` writes: {e}"
                ),
                body: Value::Null,
            })?;
        request = request.header(
            SIGNATURE_HEADER,
            switchyard_signing::encode_header(&signature),
        );
    }
    let request = request
        .body(Body::from(file))
        .map_err(|e| unreadable(&format!("not a request: {e}")))?;
    let response = session.api(console).send(request).await;
    let status = response.status();
    read_json(response).await.map(|record| (status, record))
}
