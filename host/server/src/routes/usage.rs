//! `GET /api/usage`: the tokens metered per answer, summed by time bucket
//! and by team, key, model, peer or node; JSON, or CSV with
//! `Accept: text/csv`. An admin sees every caller; a `usage:read` key sees
//! the callers of its own team.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use switchyard_protocol::usage::{UsageReport, UsageRow};
use switchyard_store::usage::{UsageDimension, UsageQuery};

use crate::auth::Authenticated;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiQuery;
use crate::routes::admission_decisions::{Since, parse_since};
use crate::state::AppState;

/// The query string as sent.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UsageParams {
    /// Dimensions to group by, comma-separated: `team`, `key`, `model`,
    /// `peer`, `node` [default: none, one row per bucket].
    group_by: Option<String>,
    /// Events at or after this RFC 3339 time.
    from: Option<String>,
    /// Events before this RFC 3339 time.
    to: Option<String>,
    /// `minute`, `hour` or `day` [default: `hour`].
    granularity: Option<String>,
}

impl UsageParams {
    /// The store's query; the error names the parameter that is wrong.
    fn query(self) -> Result<UsageQuery, String> {
        let mut group_by = Vec::new();
        for name in self
            .group_by
            .as_deref()
            .unwrap_or("")
            .split(',')
            .filter(|n| !n.is_empty())
        {
            let dim = UsageDimension::parse(name.trim()).ok_or_else(|| {
                format!(
                    "group_by: '{}' is none of team, key, model, peer, node",
                    shown(name)
                )
            })?;
            if !group_by.contains(&dim) {
                group_by.push(dim);
            }
        }
        let granularity = match self.granularity.as_deref().unwrap_or("hour") {
            "minute" => "minute",
            "hour" => "hour",
            "day" => "day",
            other => {
                return Err(format!(
                    "granularity must be minute, hour or day, got '{}'",
                    shown(other)
                ));
            }
        };
        Ok(UsageQuery {
            granularity,
            group_by,
            from: time("from", self.from.as_deref())?,
            to: time("to", self.to.as_deref())?,
            team: None,
        })
    }
}

/// An RFC 3339 time parameter.
fn time(name: &str, value: Option<&str>) -> Result<Option<String>, String> {
    match value.map(|v| parse_since(Some(v))).transpose() {
        Ok(None | Some(Since::Newest)) => Ok(None),
        Ok(Some(Since::Time(t))) => Ok(Some(t)),
        _ => Err(format!(
            "{name} must be an RFC 3339 time (2026-12-01T10:00:00Z)"
        )),
    }
}

fn shown(text: &str) -> String {
    text.chars().take(64).collect()
}

/// The tokens metered, summed.
#[utoipa::path(get, path = "/api/usage", tag = "usage", params(UsageParams), responses(
    (status = 200, body = UsageReport, description = "The sums by bucket then group (CSV with `Accept: text/csv`: a header row, then one row each)"),
    (status = 400, description = "`invalid_request`: an unknown dimension or granularity, a time that is not RFC 3339, or an unknown parameter"),
    (status = 401, description = "`unauthorized`"),
    (status = 403, description = "`forbidden`: the key has neither `admin` nor `usage:read`, or has `usage:read` and is in no team"),
))]
pub async fn usage(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ApiQuery(params): ApiQuery<UsageParams>,
) -> ApiResult<Response> {
    caller.require("usage:read")?;
    let mut query = params.query().map_err(ApiError::invalid_request)?;
    if caller.require("admin").is_err() {
        let Some(team) = state.store.key_team(&caller.key_id).await? else {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "a usage:read key sees its own team's usage, and this key is in no team",
            ));
        };
        query.team = Some(team);
    }
    let report = UsageReport {
        granularity: query.granularity.to_string(),
        group_by: query
            .group_by
            .iter()
            .map(|d| d.as_str().to_string())
            .collect(),
        rows: state.store.usage(&query).await?,
        dropped: state.inference.usage.as_ref().map_or(0, |m| m.dropped()),
    };
    let csv = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/csv"));
    Ok(match csv {
        true => (
            [(header::CONTENT_TYPE, "text/csv; charset=utf-8")],
            as_csv(&report),
        )
            .into_response(),
        false => Json(report).into_response(),
    })
}

/// The report as CSV: `bucket`, the dimensions, then the sums.
pub fn as_csv(report: &UsageReport) -> String {
    let mut out = String::from("bucket");
    for dim in &report.group_by {
        out.push(',');
        out.push_str(dim);
    }
    out.push_str(",requests,prompt_tokens,completion_tokens,cached_tokens\n");
    for row in &report.rows {
        out.push_str(&row.bucket);
        for dim in &report.group_by {
            out.push(',');
            out.push_str(&field(dimension(row, dim).unwrap_or("")));
        }
        let sums = [
            row.requests,
            row.prompt_tokens,
            row.completion_tokens,
            row.cached_tokens,
        ];
        for n in sums {
            out.push(',');
            out.push_str(&n.to_string());
        }
        out.push('\n');
    }
    out
}

fn dimension<'a>(row: &'a UsageRow, name: &str) -> Option<&'a str> {
    match name {
        "team" => row.team.as_deref(),
        "key" => row.key.as_deref(),
        "model" => row.model.as_deref(),
        "peer" => row.peer.as_deref(),
        "node" => row.node.as_deref(),
        _ => None,
    }
}

/// A CSV field, quoted when it holds a comma, a quote or a line break;
/// one that a spreadsheet would run as a formula is prefixed with `'`.
fn field(value: &str) -> String {
    let value = match value.starts_with(['=', '+', '-', '@']) {
        true => format!("'{value}"),
        false => value.to_string(),
    };
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_csv_with_its_dimensions_and_quoted_fields() {
        let report = UsageReport {
            granularity: "hour".into(),
            group_by: vec!["team".into(), "model".into()],
            dropped: 0,
            rows: vec![UsageRow {
                bucket: "2026-12-04T10:00:00Z".into(),
                team: Some("a,b".into()),
                key: None,
                model: Some("=cmd".into()),
                peer: None,
                node: None,
                requests: 2,
                prompt_tokens: 10,
                completion_tokens: 4,
                cached_tokens: 1,
            }],
        };
        assert_eq!(
            as_csv(&report),
            "bucket,team,model,requests,prompt_tokens,completion_tokens,cached_tokens\n\
             2026-12-04T10:00:00Z,\"a,b\",'=cmd,2,10,4,1\n"
        );
    }

    #[test]
    fn a_bad_parameter_is_named() {
        let params = |g: &str, gr: &str| UsageParams {
            group_by: Some(g.into()),
            granularity: Some(gr.into()),
            ..Default::default()
        };
        assert!(
            params("team,bogus", "hour")
                .query()
                .unwrap_err()
                .contains("bogus")
        );
        assert!(
            params("team", "week")
                .query()
                .unwrap_err()
                .contains("granularity")
        );
        let ok = params("team,model,team", "day").query().unwrap();
        assert_eq!(ok.group_by, [UsageDimension::Team, UsageDimension::Model]);
    }
}
