//! Model patterns: an exact id, or a prefix ending in `*`.

/// Whether `model` matches `pattern`: `*` matches everything, `prefix*`
/// every id starting with `prefix`, anything else only itself.
pub fn matches(pattern: &str, model: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => model.starts_with(prefix),
        None => pattern == model,
    }
}

/// Why a pattern cannot be used, for the settings error.
pub(crate) fn check(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("a pattern may not be empty".into());
    }
    if pattern.trim_end_matches('*').contains('*') || pattern.ends_with("**") {
        return Err(format!(
            "pattern {pattern:?} is not supported: `*` may only end a pattern, once"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_matches_everything() {
        assert!(matches("*", "anything"));
        assert!(matches("*", ""));
    }

    #[test]
    fn suffix_star_matches_a_prefix() {
        assert!(matches("llama-3-*", "llama-3-8b"));
        assert!(matches("llama-3-*", "llama-3-"));
        assert!(!matches("llama-3-*", "llama-2-7b"));
        assert!(!matches("llama-3-*", "Llama-3-8b"));
    }

    #[test]
    fn plain_pattern_matches_itself_only() {
        assert!(matches("mistral-7b", "mistral-7b"));
        assert!(!matches("mistral-7b", "mistral-7b-instruct"));
    }

    #[test]
    fn star_only_at_the_end() {
        assert!(check("llama-*").is_ok());
        assert!(check("*").is_ok());
        assert!(check("").is_err());
        assert!(
            check("llama-*-8b")
                .unwrap_err()
                .contains("`*` may only end a pattern")
        );
        assert!(check("*-8b").is_err());
        assert!(check("llama**").is_err());
    }
}
