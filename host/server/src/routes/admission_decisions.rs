//! `GET /api/admission/{point}/decisions`: the decision log of a point,
//! filtered, with counts over everything the filter matches.
//!
//! The query string is parsed once into a [`DecisionFilter`]; a parameter
//! that does not parse (or one that is not a parameter) is a 400
//! `invalid_request` naming it.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use switchyard_protocol::decisions::DecisionLog;
use switchyard_store::admission_decisions::DecisionQuery;

use crate::auth::{Admin, Authorized};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiPath, ApiQuery};
use crate::state::AppState;
use switchyard_binding::admission::point;

/// Records a page holds when `limit` is not given.
pub const DEFAULT_LIMIT: i64 = 100;

/// The most records one page holds: a page is read and serialised whole.
pub const MAX_LIMIT: i64 = 1000;

/// The longest `code` or `plugin` asked for: longer ones name nothing
/// stored, and a bound keeps them out of the query.
pub const MAX_FILTER_LEN: usize = 200;

/// The query string as sent.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DecisionParams {
    /// A record id (the records after it, oldest first: a cursor, see
    /// `next_since`) or an RFC 3339 time (the records at or after it).
    /// Without it: the newest `limit` records.
    since: Option<String>,
    /// Only records with this deny code or error kind.
    code: Option<String>,
    /// Only records of this plugin: `name` or `name@version`.
    plugin: Option<String>,
    /// Records on the page, 1 to 1000 [default: 100].
    limit: Option<String>,
}

/// Where a page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Since {
    /// The newest records.
    Newest,
    /// The records after this id.
    After(i64),
    /// The records at or after this RFC 3339 time.
    Time(String),
}

/// A checked query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionFilter {
    /// Where the page starts.
    pub since: Since,
    /// A code to match.
    pub code: Option<String>,
    /// A plugin name, and a version to match.
    pub plugin: Option<(String, Option<String>)>,
    /// Records on the page.
    pub limit: i64,
}

impl DecisionFilter {
    /// Parses the parameters; the error names the one that is wrong.
    pub fn parse(params: DecisionParams) -> Result<Self, String> {
        let since = parse_since(params.since.as_deref())?;
        let code = params.code.map(|c| bounded("code", c)).transpose()?;
        let plugin = params
            .plugin
            .map(|p| bounded("plugin", p))
            .transpose()?
            .map(|p| match p.split_once('@') {
                Some((name, version)) => (name.to_string(), Some(version.to_string())),
                None => (p, None),
            });
        let limit = parse_limit(params.limit.as_deref())?;
        Ok(Self {
            since,
            code,
            plugin,
            limit,
        })
    }

    /// The store's query for `point`.
    pub fn query(self, point: &str) -> DecisionQuery {
        let (after_id, since_time) = match self.since {
            Since::Newest => (None, None),
            Since::After(id) => (Some(id), None),
            Since::Time(t) => (None, Some(t)),
        };
        let (plugin, version) = self.plugin.map_or((None, None), |(n, v)| (Some(n), v));
        DecisionQuery {
            point: point.to_string(),
            after_id,
            since_time,
            code: self.code,
            plugin,
            version,
            limit: self.limit,
        }
    }
}

/// `since` as a page's start: a record id (the records after it) or an
/// RFC 3339 time; absent, the newest records.
pub(crate) fn parse_since(since: Option<&str>) -> Result<Since, String> {
    Ok(match since {
        None | Some("") => Since::Newest,
        Some(text) if text.bytes().all(|b| b.is_ascii_digit()) => Since::After(
            text.parse()
                .map_err(|_| format!("since: the id {text} is too large"))?,
        ),
        // RFC 3339's `t` and `z` may be lower case; PostgreSQL is
        // given the upper-case form it surely reads.
        Some(text) if is_rfc3339(text) => Since::Time(text.to_ascii_uppercase()),
        Some(text) => {
            return Err(format!(
                "since must be a record id or an RFC 3339 time (2026-12-01T10:00:00Z), got '{}'",
                shown(text)
            ));
        }
    })
}

/// `limit`: 1 to [`MAX_LIMIT`], [`DEFAULT_LIMIT`] when absent.
pub(crate) fn parse_limit(limit: Option<&str>) -> Result<i64, String> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(text) => match text.parse::<i64>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            _ => Err(format!(
                "limit must be 1 to {MAX_LIMIT}, got '{}'",
                shown(text)
            )),
        },
    }
}

/// A client's text in a message: at most 64 characters of it.
fn shown(text: &str) -> &str {
    text.char_indices()
        .nth(64)
        .map_or(text, |(i, _)| &text[..i])
}

pub(crate) fn bounded(name: &str, value: String) -> Result<String, String> {
    if value.is_empty() || value.len() > MAX_FILTER_LEN || value.chars().any(char::is_control) {
        return Err(format!(
            "{name} must be 1 to {MAX_FILTER_LEN} characters without control characters"
        ));
    }
    Ok(value)
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, with a real date: what
/// PostgreSQL then reads as a `timestamptz` without a surprise.
fn is_rfc3339(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = b.get(range)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0')))
    };
    let sep = |i: usize, c: &[u8]| b.get(i).is_some_and(|x| c.contains(x));
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        digits(0..4),
        digits(5..7),
        digits(8..10),
        digits(11..13),
        digits(14..16),
        digits(17..19),
    ) else {
        return false;
    };
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt") && sep(13, b":") && sep(16, b":")) {
        return false;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    // Year 0 is no year to PostgreSQL; second 60 is a leap second, which it reads.
    if year == 0 || !(1..=days).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return false;
    }
    let mut rest = &b[19..];
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|d| d.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return false;
        }
        rest = &frac[n..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => {
            let two = |a: &u8, b: &u8| {
                (a.is_ascii_digit() && b.is_ascii_digit())
                    .then(|| u32::from(a - b'0') * 10 + u32::from(b - b'0'))
            };
            // PostgreSQL reads offsets up to 15:59 (SQLSTATE 22009 beyond);
            // the offsets in use reach 14:00, so a larger one is a typo.
            matches!((two(h1, h2), two(m1, m2)), (Some(h), Some(m)) if h < 16 && m < 60)
        }
        _ => false,
    }
}

/// The decision log of a point: what its policies denied, patched, failed
/// on or would have denied in monitor mode (and a sample of allows).
#[utoipa::path(get, path = "/api/admission/{point}/decisions", tag = "admission",
    params(("point" = String, Path, description = "inference, deploy, transfer or federation"), DecisionParams),
    responses(
        (status = 200, body = DecisionLog, description = "The records, oldest first, and counts over all that match",
            example = json!({"decisions": [{"id": 41, "at": "2026-12-01T10:00:00.123Z", "point": "inference", "generation": 3,
                "plugin": "max-tokens", "version": "1.0.0", "mode": "monitor", "decision": "deny", "code": "max_tokens_exceeded",
                "monitor": true, "key_id": "key_4f2a", "request_sha256": "9c1e…", "request": null, "replica": "inst_8d1c"}],
                "counts": {"allow": 0, "deny": 0, "patch": 0, "error": 0, "monitor": 1}, "next_since": 41})),
        (status = 400, description = "`invalid_request`: a `since` that is neither an id nor an RFC 3339 time, a `limit` outside 1 to 1000, an empty or over-long `code` or `plugin`, or an unknown parameter"),
        (status = 401, description = "`unauthorized`"),
        (status = 403, description = "`forbidden`: the key lacks `admin`"),
        (status = 404, description = "`unknown_point`"),
    ))]
pub async fn decisions(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(point_name): ApiPath<String>,
    ApiQuery(params): ApiQuery<DecisionParams>,
) -> ApiResult<Json<DecisionLog>> {
    let point = point(&point_name)?;
    let filter = DecisionFilter::parse(params).map_err(ApiError::invalid_request)?;
    Ok(Json(
        state.store.decisions(&filter.query(point.as_str())).await?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Result<DecisionParams, String> {
        let text = pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        let uri: axum::http::Uri = format!("/d?{text}").parse().unwrap();
        axum::extract::Query::<DecisionParams>::try_from_uri(&uri)
            .map(|q| q.0)
            .map_err(|e| e.to_string())
    }

    fn parse(pairs: &[(&str, &str)]) -> Result<DecisionFilter, String> {
        DecisionFilter::parse(params(pairs)?)
    }

    #[test]
    fn no_parameters_read_the_newest_hundred() {
        let filter = parse(&[]).unwrap();
        assert_eq!(filter.since, Since::Newest);
        assert_eq!(
            (filter.limit, filter.code, filter.plugin),
            (100, None, None)
        );
    }

    #[test]
    fn since_is_an_id_cursor_or_a_time() {
        assert_eq!(parse(&[("since", "41")]).unwrap().since, Since::After(41));
        for time in [
            "2026-12-01T10:00:00Z",
            "2026-12-01T10:00:00.123456Z",
            "2024-02-29T23:59:60%2B02:00",
            "2026-12-01t10:00:00-05:30",
            "2026-12-01T10:00:00%2B15:59",
            "2026-12-01T10:00:00-15:59",
        ] {
            let filter = parse(&[("since", time)]).unwrap_or_else(|e| panic!("{time}: {e}"));
            let Since::Time(given) = filter.since else {
                panic!("{time} is a time");
            };
            assert!(!given.contains(['t', 'z']), "{given}");
        }
        for bad in [
            "yesterday",
            "2026-12-01",
            "2026-02-30T10:00:00Z",
            "2025-02-29T10:00:00Z",
            "2026-12-01T24:00:00Z",
            "2026-12-01T10:00:00",
            "2026-12-01T10:00:00.Z",
            "2026-12-01T10:00:00+0200",
            "2026-12-01T10:00:00%2B16:00",
            "2026-12-01T10:00:00-16:00",
            "2026-12-01T10:00:00-23:59",
            "0000-01-01T00:00:00Z",
            "-3",
            "99999999999999999999",
        ] {
            let error = parse(&[("since", bad)]).unwrap_err();
            assert!(error.contains("since"), "{bad}: {error}");
        }
    }

    #[test]
    fn a_plugin_is_a_name_or_name_at_version() {
        let filter = parse(&[("plugin", "max-tokens")]).unwrap();
        assert_eq!(filter.plugin, Some(("max-tokens".into(), None)));
        let filter = parse(&[("plugin", "max-tokens@1.0.0"), ("code", "x")]).unwrap();
        assert_eq!(
            filter.plugin,
            Some(("max-tokens".into(), Some("1.0.0".into())))
        );
        assert_eq!(filter.code.as_deref(), Some("x"));
        let query = filter.query("inference");
        assert_eq!(
            (query.plugin.as_deref(), query.version.as_deref()),
            (Some("max-tokens"), Some("1.0.0"))
        );
    }

    #[test]
    fn a_limit_outside_one_to_a_thousand_or_an_unknown_parameter_is_refused() {
        assert_eq!(parse(&[("limit", "1000")]).unwrap().limit, 1000);
        for bad in ["0", "1001", "-1", "ten"] {
            let error = parse(&[("limit", bad)]).unwrap_err();
            assert!(error.contains("limit must be 1 to 1000"), "{error}");
        }
        assert!(parse(&[("code", "")]).is_err());
        assert!(parse(&[("code", &"x".repeat(MAX_FILTER_LEN + 1))]).is_err());
        assert!(parse(&[("decision", "deny")]).is_err());
    }
}
