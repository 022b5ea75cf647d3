//! One validator for what clients name things with: the names of records
//! (model ids and revisions, plugin names and versions, deployments' served
//! names), every path parameter, and the free-text labels of keys and
//! tokens. Each rule is checked here, before any of it reaches the database,
//! so that a bad name is a 400 that says what is allowed, never a database
//! error (PostgreSQL's `text` cannot hold a NUL at all).

/// A name, path parameter or label that breaks its rule; each message
/// names the field and says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidError {
    /// Not an [`is_name`].
    #[error(
        "{0} must be 1 to {MAX_NAME} letters, digits, '-', '_', '.' or ':', not starting with '.'"
    )]
    Name(String),
    /// A path parameter that is not a [`path_segment`].
    #[error(
        "path parameter `{0}` must be 1 to {MAX_NAME} letters, digits, '-', '_', '.', ':' or '+'"
    )]
    PathSegment(String),
    /// Not a [`served_name`].
    #[error("{0} must be 1 to {MAX_NAME} visible ASCII characters")]
    ServedName(String),
    /// Not a [`label`].
    #[error("{0} must be 1 to {MAX_LABEL} characters without control characters")]
    Label(String),
}

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

/// [`is_name`], or an error naming the field and the rule.
pub fn name(field: &str, value: &str) -> Result<(), ValidError> {
    if is_name(value) {
        return Ok(());
    }
    Err(ValidError::Name(field.into()))
}

/// A path parameter: the rule of [`is_name`]. Every id the API hands out
/// (`key_…`, `node_…`, `dep_…`), every name it stores, a SHA-256, a point, a
/// control verb (`engine.list`) and a service name follow it; `+` is
/// allowed too, which a plugin version may hold (semver build metadata, as
/// in `0.1.0+sha256.…`, the version of a built-in or folder carrier).
pub fn path_segment(field: &str, value: &str) -> Result<(), ValidError> {
    if is_name(&value.replace('+', "-")) {
        return Ok(());
    }
    Err(ValidError::PathSegment(field.into()))
}

/// The name clients ask for on `/v1` (`served_model_name`): 1 to
/// [`MAX_NAME`] visible ASCII characters, so that `org/model` ids as
/// Hugging Face and OpenAI spell them are allowed, and no space, control
/// character or NUL is.
pub fn served_name(field: &str, value: &str) -> Result<(), ValidError> {
    if !value.is_empty() && value.len() <= MAX_NAME && value.bytes().all(|b| b.is_ascii_graphic()) {
        return Ok(());
    }
    Err(ValidError::ServedName(field.into()))
}

/// A free-text label: 1 to [`MAX_LABEL`] characters, none of them a control
/// character (a NUL, a newline that would forge a log line).
pub fn label(field: &str, value: &str) -> Result<(), ValidError> {
    let length = value.chars().count();
    if (1..=MAX_LABEL).contains(&length) && !value.chars().any(char::is_control) {
        return Ok(());
    }
    Err(ValidError::Label(field.into()))
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
        assert_eq!(name("id", "a\0"), Err(ValidError::Name("id".into())));
        assert_eq!(
            path_segment("id", "").unwrap_err().to_string(),
            "path parameter `id` must be 1 to 256 letters, digits, '-', '_', '.', ':' or '+'"
        );
        assert!(path_segment("version", "0.1.0+sha256.81d4caaa95675d2c").is_ok());
        assert!(path_segment("version", ".+").is_err());
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
