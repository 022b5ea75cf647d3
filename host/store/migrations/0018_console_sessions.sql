-- Web console sessions. The cookie holds a random id; only its SHA-256 is
-- kept, with the key it was opened with, so revoking the key ends the
-- session on every replica at its next page.

CREATE TABLE console_sessions (
    id_sha256   bytea PRIMARY KEY,
    key_id      text NOT NULL,
    -- Every form and script request carries it (double-submit is not
    -- enough against a subdomain that can set cookies).
    csrf_token  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);
