//! `-ERR` lines, sorted into those that end the connection and those that
//! only refuse one operation.
//!
//! The server closes the connection after every `-ERR` except a refused
//! subject or permission (and a subscription over the limit); the engine must
//! know which so it neither reconnects needlessly nor keeps a dead connection.

/// What a `-ERR` is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerErrorKind {
    /// `Authorization Violation`: bad or missing credentials.
    AuthorizationViolation,
    /// `Authentication Timeout` or `Authorization Timeout`: CONNECT came too late.
    AuthenticationTimeout,
    /// `User Authentication Expired`, `Authentication Revoked` and the like.
    AuthenticationExpired,
    /// `Permissions Violation for Publish/Subscription to ...`: one operation refused.
    PermissionsViolation,
    /// `Invalid Subject` / `Invalid Publish Subject`: one operation refused.
    InvalidSubject,
    /// `Maximum Subscriptions Exceeded`: one SUB refused.
    MaxSubscriptionsExceeded,
    /// `Maximum Payload Violation`.
    MaxPayloadViolation,
    /// `Maximum Connections Exceeded`.
    MaxConnectionsExceeded,
    /// `Stale Connection`: the server stopped hearing our PONGs.
    StaleConnection,
    /// `Slow Consumer`: we read too slowly and the server gave up on us.
    SlowConsumer,
    /// `Secure Connection - TLS Required`.
    TlsRequired,
    /// Anything else (`Unknown Protocol Operation`, `Parser Error`, ...).
    Other,
}

impl ServerErrorKind {
    /// Whether the server closes the connection after this error.
    pub fn is_fatal(self) -> bool {
        !matches!(
            self,
            Self::PermissionsViolation | Self::InvalidSubject | Self::MaxSubscriptionsExceeded
        )
    }
}

/// One `-ERR` from the server, with its quotes removed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("server error: {message}")]
pub struct ServerError {
    /// What the error is about.
    pub kind: ServerErrorKind,
    /// The server's text, such as `Permissions Violation for Publish to "jobs.1"`.
    pub message: String,
}

impl ServerError {
    /// Classifies the text of a `-ERR` line (quotes already stripped).
    pub fn new(message: impl Into<String>) -> Self {
        let message = message.into();
        let lower = message.to_ascii_lowercase();
        let has = |s: &str| lower.contains(s);
        let kind = if has("authorization violation") {
            ServerErrorKind::AuthorizationViolation
        } else if has("authentication timeout") || has("authorization timeout") {
            ServerErrorKind::AuthenticationTimeout
        } else if has("expired") || has("revoked") {
            ServerErrorKind::AuthenticationExpired
        } else if has("permissions violation") {
            ServerErrorKind::PermissionsViolation
        } else if has("invalid subject") || has("invalid publish subject") {
            ServerErrorKind::InvalidSubject
        } else if has("maximum subscriptions exceeded") {
            ServerErrorKind::MaxSubscriptionsExceeded
        } else if has("maximum payload") {
            ServerErrorKind::MaxPayloadViolation
        } else if has("maximum connections exceeded") {
            ServerErrorKind::MaxConnectionsExceeded
        } else if has("stale connection") {
            ServerErrorKind::StaleConnection
        } else if has("slow consumer") {
            ServerErrorKind::SlowConsumer
        } else if has("tls required") {
            ServerErrorKind::TlsRequired
        } else {
            ServerErrorKind::Other
        };
        Self { kind, message }
    }

    /// Whether the server closes the connection after this error.
    pub fn is_fatal(&self) -> bool {
        self.kind.is_fatal()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fatal_and_per_operation() {
        let fatal = [
            (
                "Authorization Violation",
                ServerErrorKind::AuthorizationViolation,
            ),
            (
                "Authentication Timeout",
                ServerErrorKind::AuthenticationTimeout,
            ),
            (
                "User Authentication Expired",
                ServerErrorKind::AuthenticationExpired,
            ),
            (
                "Maximum Payload Violation",
                ServerErrorKind::MaxPayloadViolation,
            ),
            (
                "Maximum Connections Exceeded",
                ServerErrorKind::MaxConnectionsExceeded,
            ),
            ("Stale Connection", ServerErrorKind::StaleConnection),
            ("Slow Consumer", ServerErrorKind::SlowConsumer),
            (
                "Secure Connection - TLS Required",
                ServerErrorKind::TlsRequired,
            ),
            ("Unknown Protocol Operation", ServerErrorKind::Other),
        ];
        for (text, kind) in fatal {
            let e = ServerError::new(text);
            assert_eq!(e.kind, kind, "{text}");
            assert!(e.is_fatal(), "{text}");
        }
        let per_op = [
            "Permissions Violation for Publish to \"jobs.1\"",
            "Permissions Violation for Subscription to \"cache.*\"",
            "Invalid Subject",
            "Invalid Publish Subject",
            "Maximum Subscriptions Exceeded",
        ];
        for text in per_op {
            assert!(!ServerError::new(text).is_fatal(), "{text}");
        }
    }
}
