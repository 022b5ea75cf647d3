-- Workers: registration tokens, nodes with their own credentials, and which
-- replica holds each worker's connection.

CREATE TABLE registration_tokens (
    id            text PRIMARY KEY,
    name          text NOT NULL,
    token_sha256  bytea NOT NULL UNIQUE,
    created_by    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz
);

CREATE TABLE nodes (
    id                 text PRIMARY KEY,
    name               text NOT NULL UNIQUE,
    state              text NOT NULL CHECK (state IN ('pending', 'healthy', 'unhealthy', 'draining', 'offline')),
    -- SHA-256 of the node's own credential; every registration replaces it.
    credential_sha256  bytea NOT NULL,
    address            text,
    inventory          jsonb NOT NULL DEFAULT '{}',
    registered_at      timestamptz NOT NULL DEFAULT now(),
    approved_at        timestamptz,
    approved_by        text,
    last_heartbeat_at  timestamptz
);

-- Claims on a worker's connection: each claim takes a fresh epoch, so a
-- replica that lost a worker cannot release the claim of the one that won it.
CREATE SEQUENCE node_connection_epochs;

CREATE TABLE node_connections (
    node_id      text NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    lane         text NOT NULL CHECK (lane IN ('inference', 'bulk')),
    instance_id  text NOT NULL,
    epoch        bigint NOT NULL,
    claimed_at   timestamptz NOT NULL DEFAULT now(),
    released_at  timestamptz,
    PRIMARY KEY (node_id, lane)
);
