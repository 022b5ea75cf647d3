-- The admin audit trail: one row per admin change, appended only. Each row
-- carries the SHA-256 of the row before and its own, computed by the
-- writer over `prev_sha256` and every other column (store/src/audit.rs),
-- so an edited, removed or reordered row breaks the chain where it stands.
-- `at` is kept as the exact text that was hashed.

CREATE TABLE audit_log (
    seq          bigint PRIMARY KEY,
    at           text NOT NULL,
    actor        text NOT NULL,
    actor_name   text NOT NULL,
    remote       text,
    method       text NOT NULL,
    route        text NOT NULL,
    object       text,
    summary      text NOT NULL,
    status       integer NOT NULL,
    prev_sha256  bytea NOT NULL,
    sha256       bytea NOT NULL
);

CREATE INDEX audit_log_actor ON audit_log (actor, seq);
CREATE INDEX audit_log_object ON audit_log (object, seq);
