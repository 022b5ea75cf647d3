//! `GET/PUT /api/cluster/settings`: the NATS URLs of the `nats` set, the
//! waits of a carrier change, and which plugin kinds must be signed
//! (`require_signed`) ([`ClusterSettings`]).
//!
//! A `PUT` takes a partial object and is parsed once into a [`SettingsPatch`]
//! (unknown key 400 `unknown_setting`, bad value 400 `invalid_setting`), then
//! judged against the cluster: a NATS URL does not change while a change is
//! under way (409 `change_under_way`), and a new one must answer from this
//! replica (422 `unreachable`). Saving a URL never switches the carrier: the
//! next change (or start) uses it.
//!
//! Credentials never live in a setting: a URL with a user or password is
//! refused (NATS clients take them from their own configuration, as the
//! NATS CLI's contexts and Kubernetes' secrets keep them out of shared
//! config). A URL stored before this check (a `--nats-url` with a
//! password) is shown masked, and no URL's value is ever logged.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Map, Value};
use switchyard_protocol::carrier::{ClusterSettings, MAX_ATTACH_JITTER_MS, MIN_WAIT_MS};
use switchyard_protocol::signing::RequireSigned;
use switchyard_protocol::state::CarrierRowState;

use crate::auth::{Admin, Authorized};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::state::AppState;
use switchyard_carrier_set::nats_url::NatsTarget;
use switchyard_carrier_set::nats_url::masked;

/// The settings, URLs masked.
#[utoipa::path(get, path = "/api/cluster/settings", tag = "cluster",
    security(("bearer" = [])),
    responses(
        (status = 200, body = ClusterSettings, description = "The settings; a password inside a URL shows as `***`",
            example = json!({"nats_url": "nats://10.0.0.5:4222", "worker_nats_url": null, "prepare_timeout_ms": 60000, "window_ms": 30000, "max_drain_ms": 120000, "attach_jitter_ms": 10000, "require_signed": {"policy": true, "grant": false, "carrier": false}})),
        (status = 401, description = "`unauthorized`"),
        (status = 403, description = "`forbidden`: the key lacks `admin`"),
    ))]
pub async fn show(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<ClusterSettings>> {
    Ok(Json(masked(state.store.cluster_settings().await?)))
}

/// Changes some settings (a partial object; `null` clears a URL) and
/// answers with all of them, URLs masked. A new NATS URL is checked from
/// this replica first; it is used from the next carrier change on. A
/// plain server is kept as `host:port` (`nats://h:4222` and `h:4222` are
/// one server), a TLS one as `tls://host:port`.
#[utoipa::path(put, path = "/api/cluster/settings", tag = "cluster",
    security(("bearer" = [])),
    request_body(content = Object, description = "Any of the settings' keys",
        example = json!({"nats_url": "nats://10.0.0.5:4222", "window_ms": 10000})),
    responses(
        (status = 200, body = ClusterSettings, description = "The settings after the change, URLs masked"),
        (status = 400, description = "`unknown_setting`: a key that names no setting; `invalid_setting`: a `require_signed` that is not an object of `policy`, `grant` and `carrier` booleans, a wait under 5000 ms, a jitter over 600000 ms, a value of the wrong type, a URL that is not `nats://host[:port]`, `tls://host[:port]` or `host:port`, or a URL with credentials"),
        (status = 401, description = "`unauthorized`"),
        (status = 403, description = "`forbidden`: the key lacks `admin`"),
        (status = 409, description = "`change_under_way`: a NATS URL cannot change while a carrier change is under way"),
        (status = 422, description = "`unreachable`: this replica cannot reach the NATS server within 3 s, or what answers is not one"),
    ))]
pub async fn update(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Json<ClusterSettings>> {
    // Read as any JSON first: serde's own refusal of a non-object would
    // quote the body back, and a body may be a URL with its password.
    let Value::Object(body) = body else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_setting",
            "the body is an object of settings: {\"window_ms\": 10000}",
        ));
    };
    let patch = SettingsPatch::parse(&body)?;
    let current = state.store.cluster_settings().await?;
    let next = patch.apply(current.clone());
    let urls_changed: Vec<&str> = changed_urls(&current, &next);
    if !urls_changed.is_empty() {
        // Read just before saving: a change that begins in between uses the
        // settings it read when it began (what the leader pins at prepare).
        let row = state.store.cluster_carrier().await?;
        if let Some(row) = row.filter(|r| r.state() != CarrierRowState::Stable) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "change_under_way",
                format!(
                    "a carrier change is under way (state {}, epoch {}); change {} once it settled or aborted",
                    row.state().as_str(),
                    row.epoch,
                    urls_changed.join(" and ")
                ),
            ));
        }
        for (name, url) in [
            ("nats_url", &next.nats_url),
            ("worker_nats_url", &next.worker_nats_url),
        ] {
            if let Some(url) = url.as_deref().filter(|_| urls_changed.contains(&name)) {
                let target = NatsTarget::parse(url).map_err(|why| invalid(name, &why))?;
                target.reach().await.map_err(|why| {
                    // One answer whatever the cause (refused, silent, some
                    // other server): the settings are no probe of what
                    // listens on internal addresses. The cause is logged.
                    tracing::info!(setting = name, cause = %why, "a NATS URL was not reachable");
                    ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "unreachable",
                        format!("{name}: {UNREACHABLE}"),
                    )
                })?;
            }
        }
    }
    state.store.put_cluster_settings(&next).await?;
    // Names only: a URL's value stays out of the log.
    let keys: Vec<&str> = body.keys().map(String::as_str).collect();
    tracing::info!(by = %caller.key_id, ?keys, "cluster settings saved");
    Ok(Json(masked(next)))
}

/// The one message of a NATS URL that did not answer as a NATS server.
pub const UNREACHABLE: &str = "no NATS server answered at this URL from this replica within 3 s (see the replica's log for the cause)";

/// A `PUT`'s body, parsed: each field `Some` when the body names it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SettingsPatch {
    /// `Some(None)`: cleared.
    nats_url: Option<Option<String>>,
    worker_nats_url: Option<Option<String>>,
    prepare_timeout_ms: Option<u64>,
    window_ms: Option<u64>,
    max_drain_ms: Option<u64>,
    attach_jitter_ms: Option<u64>,
    /// Each kind named: `[policy, grant, carrier]`.
    require_signed: Option<[Option<bool>; 3]>,
}

impl SettingsPatch {
    /// Parses a partial settings object: 400 `unknown_setting` for a key
    /// that names no setting, 400 `invalid_setting` for a bad value.
    pub fn parse(body: &Map<String, Value>) -> Result<Self, ApiError> {
        let mut patch = Self::default();
        for (key, value) in body {
            match key.as_str() {
                "nats_url" => patch.nats_url = Some(url_value(key, value)?),
                "worker_nats_url" => patch.worker_nats_url = Some(url_value(key, value)?),
                "prepare_timeout_ms" => patch.prepare_timeout_ms = Some(wait_value(key, value)?),
                "window_ms" => patch.window_ms = Some(wait_value(key, value)?),
                "max_drain_ms" => patch.max_drain_ms = Some(wait_value(key, value)?),
                "attach_jitter_ms" => {
                    let jitter = millis(key, value)?;
                    if jitter > MAX_ATTACH_JITTER_MS {
                        return Err(invalid(
                            key,
                            &format!("must be at most {MAX_ATTACH_JITTER_MS} ms, got {jitter}"),
                        ));
                    }
                    patch.attach_jitter_ms = Some(jitter);
                }
                "require_signed" => patch.require_signed = Some(required_kinds(key, value)?),
                _ => {
                    // Echo the key only when it is a plain name: it is the
                    // client's own text, shown back in a message.
                    let shown = if switchyard_protocol::valid::path_segment("key", key).is_ok() {
                        format!("'{key}'")
                    } else {
                        "a key".into()
                    };
                    return Err(ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "unknown_setting",
                        format!(
                            "{shown} is no setting; the settings are {}",
                            ClusterSettings::NAMES.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(patch)
    }

    /// The settings with this patch laid over them.
    pub fn apply(self, mut settings: ClusterSettings) -> ClusterSettings {
        if let Some(url) = self.nats_url {
            settings.nats_url = url;
        }
        if let Some(url) = self.worker_nats_url {
            settings.worker_nats_url = url;
        }
        if let Some(ms) = self.prepare_timeout_ms {
            settings.prepare_timeout_ms = ms;
        }
        if let Some(ms) = self.window_ms {
            settings.window_ms = ms;
        }
        if let Some(ms) = self.max_drain_ms {
            settings.max_drain_ms = ms;
        }
        if let Some(ms) = self.attach_jitter_ms {
            settings.attach_jitter_ms = ms;
        }
        if let Some([policy, grant, carrier]) = self.require_signed {
            let required = &mut settings.require_signed;
            required.policy = policy.unwrap_or(required.policy);
            required.grant = grant.unwrap_or(required.grant);
            required.carrier = carrier.unwrap_or(required.carrier);
        }
        settings
    }
}

fn invalid(key: &str, why: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_setting",
        format!("{key}: {why}"),
    )
}

fn millis(key: &str, value: &Value) -> Result<u64, ApiError> {
    value
        .as_u64()
        .ok_or_else(|| invalid(key, "must be a whole number of milliseconds"))
}

fn wait_value(key: &str, value: &Value) -> Result<u64, ApiError> {
    let ms = millis(key, value)?;
    if ms < MIN_WAIT_MS {
        return Err(invalid(
            key,
            &format!(
                "must be at least {MIN_WAIT_MS} ms (a replica's poll must see a change before it ends), got {ms}"
            ),
        ));
    }
    Ok(ms)
}

fn url_value(key: &str, value: &Value) -> Result<Option<String>, ApiError> {
    match value {
        Value::Null => Ok(None),
        Value::String(url) => {
            let target = NatsTarget::parse(url).map_err(|why| invalid(key, &why))?;
            Ok(Some(target.canonical()))
        }
        _ => Err(invalid(key, "must be a URL (nats://host:port) or null")),
    }
}

/// `require_signed`: an object of some of `policy`, `grant`, `carrier`,
/// each a boolean; the kinds it leaves out keep their value.
fn required_kinds(key: &str, value: &Value) -> Result<[Option<bool>; 3], ApiError> {
    let expected = || {
        invalid(
            key,
            "must be an object of booleans: {\"policy\": true, \"grant\": false, \"carrier\": true}",
        )
    };
    let Value::Object(kinds) = value else {
        return Err(expected());
    };
    let mut flags = [None; 3];
    for (kind, on) in kinds {
        let slot = RequireSigned::NAMES
            .iter()
            .position(|name| name == kind)
            .ok_or_else(expected)?;
        flags[slot] = Some(on.as_bool().ok_or_else(expected)?);
    }
    Ok(flags)
}

/// The URL settings whose value differs.
fn changed_urls(before: &ClusterSettings, after: &ClusterSettings) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if before.nats_url != after.nats_url {
        changed.push("nats_url");
    }
    if before.worker_nats_url != after.worker_nats_url {
        changed.push("worker_nats_url");
    }
    changed
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use switchyard_carrier_set::nats_url::mask_url;

    use super::*;

    fn parse(body: Value) -> Result<SettingsPatch, ApiError> {
        SettingsPatch::parse(body.as_object().unwrap())
    }

    #[test]
    fn passwords_and_tokens_inside_urls_are_masked() {
        assert_eq!(
            mask_url("nats://user:s3cret@host:4222"),
            "nats://user:***@host:4222"
        );
        assert_eq!(mask_url("nats://t0ken@host:4222"), "nats://***@host:4222");
        assert_eq!(
            mask_url("tls://a:b@h1:1,nats://h2:2"),
            "tls://a:***@h1:1,nats://h2:2"
        );
        assert_eq!(mask_url("nats://u:p@w@host/x"), "nats://u:***@host/x");
        assert_eq!(mask_url("nats://host:4222"), "nats://host:4222");
        assert_eq!(mask_url("not a url"), "not a url");
    }

    #[test]
    fn a_url_is_nats_or_tls_with_a_host_and_no_credentials() {
        assert_eq!(
            NatsTarget::parse("nats://10.0.0.5:4333").unwrap(),
            NatsTarget {
                host: "10.0.0.5".into(),
                port: 4333,
                tls: false,
            }
        );
        let canonical = |text| NatsTarget::parse(text).unwrap().canonical();
        assert_eq!(canonical("nats://10.0.0.5:4333"), "10.0.0.5:4333");
        assert_eq!(canonical(" 10.0.0.5:4333 "), "10.0.0.5:4333");
        assert_eq!(canonical("nats://nats.internal"), "nats.internal:4222");
        assert_eq!(canonical("tls://nats.internal"), "tls://nats.internal:4222");
        assert_eq!(canonical("nats://[::1]:4222"), "[::1]:4222");
        for bad in [
            "http://host:4222",
            "nats://",
            "nats://host:4222/path",
            "nats://host:4222?x=1",
            "nats://host:99999",
            "host:port",
        ] {
            assert!(NatsTarget::parse(bad).is_err(), "{bad}");
        }
        for secret in [
            "nats://u:pw@host:4222",
            "nats://tok@host:4222",
            "u:pw@host:4222",
        ] {
            let why = NatsTarget::parse(secret).unwrap_err();
            assert!(why.contains("credentials"), "{why}");
            assert!(!why.contains("pw") && !why.contains("tok"), "{why}");
        }
    }

    #[test]
    fn a_patch_names_known_settings_with_values_of_their_kind() {
        let patch = parse(json!({"window_ms": 10000, "nats_url": null})).unwrap();
        let applied = patch.apply(ClusterSettings {
            nats_url: Some("nats://old:4222".into()),
            ..ClusterSettings::default()
        });
        assert_eq!(applied.window_ms, 10_000);
        assert_eq!(applied.nats_url, None);
        assert_eq!(applied.prepare_timeout_ms, 60_000, "untouched keys stay");

        let code = |body| parse(body).unwrap_err().code;
        assert_eq!(code(json!({"windw_ms": 10000})), "unknown_setting");
        assert_eq!(code(json!({"window_ms": 4999})), "invalid_setting");
        assert_eq!(code(json!({"window_ms": "10000"})), "invalid_setting");
        assert_eq!(code(json!({"window_ms": -1})), "invalid_setting");
        assert_eq!(code(json!({"window_ms": 1.5e4})), "invalid_setting");
        assert_eq!(code(json!({"window_ms": null})), "invalid_setting");
        assert_eq!(
            code(json!({"attach_jitter_ms": 600_001})),
            "invalid_setting"
        );
        assert_eq!(code(json!({"nats_url": 4222})), "invalid_setting");
        assert_eq!(code(json!({"require_signed": true})), "invalid_setting");
        assert_eq!(
            code(json!({"require_signed": {"policies": true}})),
            "invalid_setting"
        );
        assert_eq!(
            code(json!({"require_signed": {"policy": "yes"}})),
            "invalid_setting"
        );
        // Kinds left out keep their value.
        let strict = parse(json!({"require_signed": {"grant": true}}))
            .unwrap()
            .apply(ClusterSettings {
                require_signed: RequireSigned {
                    policy: true,
                    ..RequireSigned::default()
                },
                ..ClusterSettings::default()
            });
        assert_eq!(
            strict.require_signed,
            RequireSigned {
                policy: true,
                grant: true,
                carrier: false
            }
        );
        // A jitter may be zero (tests); a wait may not be under five seconds.
        assert!(parse(json!({"attach_jitter_ms": 0})).is_ok());
        assert!(parse(json!({"max_drain_ms": MIN_WAIT_MS})).is_ok());
        let secret = parse(json!({"nats_url": "nats://u:hunter2@h:4222"})).unwrap_err();
        assert_eq!(secret.code, "invalid_setting");
        assert!(!secret.message.contains("hunter2"), "{}", secret.message);
    }

    #[test]
    fn every_name_the_protocol_lists_is_a_setting_here() {
        for name in ClusterSettings::NAMES {
            let value = if ClusterSettings::URLS.contains(&name) {
                json!("nats://h:4222")
            } else if name == "require_signed" {
                json!({"policy": true})
            } else {
                json!(MIN_WAIT_MS)
            };
            assert!(parse(json!({ name: value })).is_ok(), "{name}");
        }
    }

    #[tokio::test]
    async fn a_port_nobody_listens_on_is_unreachable_and_a_silent_one_is_no_nats() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let closed = NatsTarget {
            host: "127.0.0.1".into(),
            port,
            tls: false,
        };
        assert!(closed.reach().await.unwrap_err().contains("cannot connect"));

        // Something that accepts and says what NATS says, and something
        // that accepts and says otherwise.
        for (greeting, ok) in [
            ("INFO {\"server_id\":\"x\"}\r\n", true),
            ("HTTP/1.1 400\r\n", false),
        ] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let server = tokio::spawn(async move {
                let (mut socket, _) = listener.accept().await.unwrap();
                tokio::io::AsyncWriteExt::write_all(&mut socket, greeting.as_bytes())
                    .await
                    .unwrap();
            });
            let target = NatsTarget {
                host: "127.0.0.1".into(),
                port,
                tls: false,
            };
            assert_eq!(target.reach().await.is_ok(), ok, "{greeting}");
            server.await.unwrap();
        }
    }
}
