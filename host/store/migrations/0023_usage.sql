-- Usage: one row per /v1 answer that reached an engine, written in batches
-- by each replica's meter (store/src/usage.rs). Reports sum them by time
-- bucket and by team (through the key), key, model, peer or node.

CREATE TABLE usage_events (
    id                 bigserial PRIMARY KEY,
    at                 timestamptz NOT NULL,
    caller             text NOT NULL,
    model              text NOT NULL,
    served_by          text NOT NULL,
    node               text NOT NULL,
    prompt_tokens      bigint NOT NULL,
    completion_tokens  bigint NOT NULL,
    cached_tokens      bigint NOT NULL,
    reported           boolean NOT NULL,
    status             integer NOT NULL,
    stream             boolean NOT NULL,
    first_byte_ms      bigint NOT NULL,
    duration_ms        bigint NOT NULL,
    replica            text NOT NULL
);

CREATE INDEX usage_events_at ON usage_events (at);
CREATE INDEX usage_events_caller ON usage_events (caller, at);
