//! The decision for a request at a given time.

use switchyard_sdk::{InferenceDecision, InferenceRequest};

use crate::{Settings, weekday_at};

/// Deny code of a request on a closed day.
pub const DAY_NOT_ALLOWED: &str = "day_not_allowed";

/// Denies `request` when `now_unix_ms` falls on one of the configured days.
///
/// The time is a parameter so that tests can pick the day; the policy
/// passes the host's clock.
pub fn evaluate_inference_at(
    settings: &Settings,
    request: &InferenceRequest,
    now_unix_ms: u64,
) -> InferenceDecision {
    let today = weekday_at(now_unix_ms, settings.utc_offset_minutes);
    if !settings.days.contains(&today) {
        return InferenceDecision::Allow;
    }
    InferenceDecision::deny(
        DAY_NOT_ALLOWED,
        format!(
            "inference on {} is closed on {}s (UTC{})",
            request.model,
            today.name(),
            format_offset(settings.utc_offset_minutes)
        ),
    )
}

/// `+01:00`, `-05:30`.
fn format_offset(minutes: i32) -> String {
    let sign = if minutes < 0 { '-' } else { '+' };
    let minutes = minutes.unsigned_abs();
    format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_read_like_time_zones() {
        assert_eq!(format_offset(0), "+00:00");
        assert_eq!(format_offset(60), "+01:00");
        assert_eq!(format_offset(-330), "-05:30");
    }
}
