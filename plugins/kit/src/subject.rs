//! Subject rules: what a subject may look like, how a pattern matches, and
//! which roots a Switchyard carrier may use.
//!
//! Subjects are `.`-separated tokens. `*` stands for exactly one token; NATS
//! also has `>` for one or more trailing tokens, but the Switchyard carrier
//! contract keeps only `*` (a fan-out pattern must say how deep it listens),
//! so [`validate_subject`] refuses `>` even though a NATS server would take
//! it. Every carrier applies these same rules, so a change of carrier changes
//! nothing a subscriber sees.

/// Why a subject or pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubjectError {
    /// The subject has no characters at all.
    #[error("subject is empty")]
    Empty,
    /// A leading, trailing or doubled `.` leaves a token empty.
    #[error("subject `{0}` has an empty token (a leading, trailing or doubled `.`)")]
    EmptyToken(String),
    /// Spaces, tabs, newlines and control characters would break a protocol line.
    #[error("subject `{0}` contains whitespace or a control character")]
    Whitespace(String),
    /// A `*` where only a literal subject makes sense (publish, reply-to, root).
    #[error("subject `{0}` has a `*` wildcard, but only a literal subject is allowed here")]
    WildcardNotAllowed(String),
    /// `*` or `>` glued to other characters, such as `jobs.a*`.
    #[error("subject `{0}` uses `*` or `>` inside a token; a wildcard must be a whole token")]
    PartialWildcard(String),
    /// `>` is valid NATS, but the carrier contract refuses it.
    #[error("subject `{0}` uses `>`, which Switchyard carriers refuse; use one `*` per token")]
    FullWildcard(String),
    /// The subject is valid but outside every root the [`SubjectPolicy`] allows.
    #[error("subject `{subject}` is outside the allowed roots ({allowed})")]
    NotAllowed {
        /// The refused subject.
        subject: String,
        /// The allowed roots, comma-separated, for the message.
        allowed: String,
    },
}

/// Checks one subject (or, with `allow_wildcards`, a subscription pattern).
///
/// Refuses empty subjects and tokens, whitespace and control characters, `*`
/// or `>` inside a token, `>` anywhere, and `*` unless `allow_wildcards`.
pub fn validate_subject(subject: &str, allow_wildcards: bool) -> Result<(), SubjectError> {
    if subject.is_empty() {
        return Err(SubjectError::Empty);
    }
    // Every publish checks its subject, so this runs per message: bytes,
    // not chars, where the subject is ASCII (in ASCII, whitespace and
    // control characters are exactly the bytes up to space, and DEL).
    let spaced = match subject.is_ascii() {
        true => subject.bytes().any(|b| b <= b' ' || b == 0x7f),
        false => subject.chars().any(|c| c.is_whitespace() || c.is_control()),
    };
    if spaced {
        return Err(SubjectError::Whitespace(subject.to_owned()));
    }
    for token in subject.as_bytes().split(|&b| b == b'.') {
        match token {
            b"" => return Err(SubjectError::EmptyToken(subject.to_owned())),
            b"*" if allow_wildcards => {}
            b"*" => return Err(SubjectError::WildcardNotAllowed(subject.to_owned())),
            b">" => return Err(SubjectError::FullWildcard(subject.to_owned())),
            t if t.iter().any(|&b| b == b'*' || b == b'>') => {
                return Err(SubjectError::PartialWildcard(subject.to_owned()));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `subject` (literal) is matched by `pattern`, with NATS semantics:
/// `*` matches exactly one token, a final `>` matches one or more tokens.
///
/// This is the general NATS rule, so it knows `>` even though
/// [`validate_subject`] refuses it; neither argument is validated here.
pub fn subject_matches(pattern: &str, subject: &str) -> bool {
    let mut pat = pattern.split('.');
    let mut sub = subject.split('.');
    loop {
        match (pat.next(), sub.next()) {
            (None, None) => return true,
            (Some(">"), Some(_)) => return pat.next().is_none(),
            (Some("*"), Some(_)) => {}
            (Some(p), Some(s)) if p == s => {}
            _ => return false,
        }
    }
}

/// The roots a carrier may publish and subscribe under, such as `jobs.`,
/// `cache.` and `_INBOX.`, on top of [`validate_subject`].
///
/// A root matches the subjects below it (`jobs.` admits `jobs.7.progress` and
/// the pattern `jobs.*`, not `jobs` itself nor `*.progress`, which could
/// reach outside). An empty list admits every root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubjectPolicy {
    // Stored with their trailing `.` so a match is one `starts_with`.
    roots: Vec<String>,
}

impl SubjectPolicy {
    /// A policy that admits every valid subject.
    pub fn allow_all() -> Self {
        Self::default()
    }

    /// A policy that admits subjects under the given roots. A root is a
    /// literal subject, written with or without its trailing `.`.
    pub fn with_roots<I, S>(roots: I) -> Result<Self, SubjectError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let roots = roots
            .into_iter()
            .map(|root| {
                let root = root.as_ref();
                let bare = root.strip_suffix('.').unwrap_or(root);
                validate_subject(bare, false)?;
                Ok(format!("{bare}."))
            })
            .collect::<Result<Vec<_>, SubjectError>>()?;
        Ok(Self { roots })
    }

    /// The allowed roots, each with its trailing `.`; empty means any.
    pub fn roots(&self) -> &[String] {
        &self.roots
    }

    /// Validates `subject` and checks that it lies under an allowed root.
    pub fn check(&self, subject: &str, allow_wildcards: bool) -> Result<(), SubjectError> {
        validate_subject(subject, allow_wildcards)?;
        if self.roots.is_empty() || self.roots.iter().any(|r| subject.starts_with(r.as_str())) {
            Ok(())
        } else {
            Err(SubjectError::NotAllowed {
                subject: subject.to_owned(),
                allowed: self.roots.join(", "),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte check of ASCII subjects refuses exactly what the char
    /// check refuses.
    #[test]
    fn ascii_subjects_are_checked_as_chars_would_be() {
        for b in 0u8..128 {
            let c = char::from(b);
            let by_char = c.is_whitespace() || c.is_control();
            let refused = matches!(
                validate_subject(&format!("a{c}b"), false),
                Err(SubjectError::Whitespace(_))
            );
            assert_eq!(refused, by_char, "byte {b:#x}");
        }
        assert!(matches!(
            validate_subject("a\u{2028}b", false),
            Err(SubjectError::Whitespace(_))
        ));
        assert_eq!(validate_subject("café.au.lait", false), Ok(()));
    }

    #[test]
    fn literal_subjects() {
        assert_eq!(validate_subject("jobs.7.progress", false), Ok(()));
        assert_eq!(validate_subject("a", false), Ok(()));
        assert_eq!(validate_subject("", false), Err(SubjectError::Empty));
        for bad in [".a", "a.", "a..b", "."] {
            assert_eq!(
                validate_subject(bad, true),
                Err(SubjectError::EmptyToken(bad.into())),
                "{bad}"
            );
        }
        for bad in ["a b", "a\tb", "a\r\nb", "a\u{0}b", "a.b\n"] {
            assert_eq!(
                validate_subject(bad, true),
                Err(SubjectError::Whitespace(bad.into())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn wildcards() {
        assert_eq!(validate_subject("jobs.*.progress", true), Ok(()));
        assert_eq!(validate_subject("*", true), Ok(()));
        assert_eq!(
            validate_subject("jobs.*", false),
            Err(SubjectError::WildcardNotAllowed("jobs.*".into()))
        );
        for bad in ["jobs.a*", "jobs.*a", "a>", "a.>b", "**"] {
            assert_eq!(
                validate_subject(bad, true),
                Err(SubjectError::PartialWildcard(bad.into())),
                "{bad}"
            );
        }
        for bad in ["jobs.>", ">"] {
            assert_eq!(
                validate_subject(bad, true),
                Err(SubjectError::FullWildcard(bad.into()))
            );
            assert_eq!(
                validate_subject(bad, false),
                Err(SubjectError::FullWildcard(bad.into()))
            );
        }
    }

    #[test]
    fn matching() {
        assert!(subject_matches("jobs.*.progress", "jobs.7.progress"));
        assert!(!subject_matches("jobs.*.progress", "jobs.7.8.progress"));
        assert!(!subject_matches("jobs.*", "jobs"));
        assert!(!subject_matches("jobs.*", "jobs.7.progress"));
        assert!(subject_matches("jobs.*", "jobs.7"));
        assert!(subject_matches("*", "jobs"));
        assert!(subject_matches("a.b", "a.b"));
        assert!(!subject_matches("a.b", "a.c"));
        assert!(!subject_matches("a.b", "a"));
        assert!(!subject_matches("a", "a.b"));
        assert!(subject_matches("jobs.>", "jobs.7"));
        assert!(subject_matches("jobs.>", "jobs.7.progress"));
        assert!(!subject_matches("jobs.>", "jobs"));
        // `>` only counts as the last token.
        assert!(!subject_matches("jobs.>.x", "jobs.a.b"));
        assert!(subject_matches("_INBOX.tok.*", "_INBOX.tok.17"));
    }

    #[test]
    fn policy_roots() {
        let p = SubjectPolicy::with_roots(["jobs.", "cache", "_INBOX."]).unwrap();
        assert_eq!(p.roots(), ["jobs.", "cache.", "_INBOX."]);
        assert_eq!(p.check("jobs.7.progress", false), Ok(()));
        assert_eq!(p.check("cache.invalidate", false), Ok(()));
        assert_eq!(p.check("jobs.*", true), Ok(()));
        assert_eq!(p.check("_INBOX.abc.1", false), Ok(()));
        for outside in ["jobs", "jobsx.1", "cachex", "other.1"] {
            assert!(
                matches!(
                    p.check(outside, false),
                    Err(SubjectError::NotAllowed { .. })
                ),
                "{outside}"
            );
        }
        // A wildcard root could reach any root.
        assert!(matches!(
            p.check("*.progress", true),
            Err(SubjectError::NotAllowed { .. })
        ));
        // The policy still applies the subject rules.
        assert_eq!(
            p.check("jobs.>", true),
            Err(SubjectError::FullWildcard("jobs.>".into()))
        );
        assert_eq!(
            SubjectPolicy::allow_all().check("anything.at.all", false),
            Ok(())
        );
        assert_eq!(
            SubjectPolicy::with_roots(["jobs.*"]),
            Err(SubjectError::WildcardNotAllowed("jobs.*".into()))
        );
        let msg = p.check("other", false).unwrap_err().to_string();
        assert_eq!(
            msg,
            "subject `other` is outside the allowed roots (jobs., cache., _INBOX.)"
        );
    }
}
