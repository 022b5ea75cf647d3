//! One validator for what clients name things with: the names of records
//! (model ids and revisions, plugin names and versions, deployments' served
//! names), every path parameter, and the free-text labels of keys and
//! tokens. Each rule is checked here, before any of it reaches the database,
//! so that a bad name is a 400 that says what is allowed, never a database
//! error (PostgreSQL's `text` cannot hold a NUL at all).

use crate::error::{ApiError, ApiResult};

/// Longest name or path parameter: a Hugging Face `org/model` id with a
/// long revision fits in far less; anything longer is a mistake or an attack
/// on the indexes and logs that keep it.
pub const MAX_NAME: usize = 256;

/// Longest free-text label (a key's or a registration token's name): it is
/// shown in listings and logs, a line and not a document.
pub const MAX_LABEL: usize = 128;

/// A name: 1 to [`MAX_NAME`] ASCII letters, digits, `-`, `_`, `.` or `:`,
/// not starting with a dot (no `.`/`..`, no hidden files where a name
/// becomes a path).
pub fn is_name(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_NAME
        && !value.starts_with('.')
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
}

/// [`is_name`], or a 400 naming the field and the rule.
pub fn name(field: &str, value: &str) -> ApiResult<()> {
    if is_name(value) {
        return Ok(());
    }
    Err(ApiError::invalid_request(format!(
        "{field} must be 1 to {MAX_NAME} letters, digits, '-', '_', '.' or ':', not starting with '.'"
    )))
}

/// A path parameter: the rule of [`is_name`]. Every id the API hands out
/// (`key_…`, `node_…`, `dep_…`), every name it stores, a SHA-256, a point, a
/// control verb (`engine.list`) and a service name follow it.
pub fn path_segment(field: &str, value: &str) -> ApiResult<()> {
    if is_name(value) {
        return Ok(());
    }
    Err(ApiError::invalid_request(format!(
        "path parameter `{field}` must be 1 to {MAX_NAME} letters, digits, '-', '_', '.' or ':'"
    )))
}

/// The name clients ask for on `/v1` (`served_model_name`): 1 to
/// [`MAX_NAME`] visible ASCII characters, so that `org/model` ids as
/// Hugging Face and OpenAI spell them are allowed, and no space, control
/// character or NUL is.
pub fn served_name(field: &str, value: &str) -> ApiResult<()> {
    if !value.is_empty() && value.len() <= MAX_NAME && value.bytes().all(|b| b.is_ascii_graphic()) {
        return Ok(());
    }
    Err(ApiError::invalid_request(format!(
        "{field} must be 1 to {MAX_NAME} visible ASCII characters"
    )))
}

/// A free-text label: 1 to [`MAX_LABEL`] characters, none of them a control
/// character (a NUL, a newline that would forge a log line).
pub fn label(field: &str, value: &str) -> ApiResult<()> {
    let length = value.chars().count();
    if (1..=MAX_LABEL).contains(&length) && !value.chars().any(char::is_control) {
        return Ok(());
    }
    Err(ApiError::invalid_request(format!(
        "{field} must be 1 to {MAX_LABEL} characters without control characters"
    )))
}

/// Whether a JSON text holds the escape `\u0000` inside a string: raw
/// control characters are not JSON at all, so the escape is the only way a
/// NUL arrives, and neither PostgreSQL's `text` nor its `jsonb` can hold one.
/// An escaped backslash followed by `u0000` is text, not a NUL.
pub fn json_has_nul(body: &[u8]) -> bool {
    let mut i = 0;
    while i < body.len() {
        if body[i] == b'\\' {
            if body.get(i + 1) == Some(&b'u') && body.get(i + 2..i + 6) == Some(b"0000") {
                return true;
            }
            // Skip the escaped character (a second backslash included).
            i += 2;
        } else {
            i += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_plain_and_never_hidden() {
        let longest = "a".repeat(MAX_NAME);
        let too_long = "a".repeat(MAX_NAME + 1);
        for good in [
            "demo-tiny",
            "org:model_v1.2",
            "key_0123abcd",
            "1",
            longest.as_str(),
        ] {
            assert!(is_name(good), "{good}");
        }
        for bad in [
            "",
            ".hidden",
            "..",
            "a/b",
            "a b",
            "nul\0",
            "é",
            too_long.as_str(),
        ] {
            assert!(!is_name(bad), "{bad:?}");
        }
        assert_eq!(name("id", "a\0").unwrap_err().status, 400);
        assert_eq!(path_segment("id", "").unwrap_err().code, "invalid_request");
    }

    #[test]
    fn served_names_may_hold_a_slash_but_no_space() {
        assert!(served_name("m", "meta-llama/Llama-3-8B").is_ok());
        assert!(served_name("m", "a b").is_err());
        assert!(served_name("m", "a\0").is_err());
        assert!(served_name("m", "").is_err());
    }

    #[test]
    fn labels_are_one_line_of_bounded_length() {
        assert!(label("name", "ci runner — eu").is_ok());
        assert!(label("name", "").is_err());
        assert!(label("name", "a\0b").is_err());
        assert!(label("name", "forged\nline").is_err());
        assert!(label("name", &"x".repeat(MAX_LABEL + 1)).is_err());
    }

    #[test]
    fn a_nul_escape_is_found_and_an_escaped_backslash_is_not_one() {
        assert!(json_has_nul(br#"{"name":"a\u0000b"}"#));
        assert!(json_has_nul(br#"{"a\u0000":1}"#));
        assert!(json_has_nul(br#"["\\\u0000"]"#));
        assert!(!json_has_nul(br#"{"name":"a\\u0000b"}"#));
        assert!(!json_has_nul(br#"{"name":"\u0001"}"#));
        assert!(!json_has_nul(br#"{"name":"plain"}"#));
    }
}
