-- The admission decision log: one row per policy answer that matters (every
-- deny, patch, error and monitor hit; allows sampled), written in batches by
-- each replica's recorder and pruned by count and age. The request record is
-- kept only as its SHA-256 unless the binding asked for it (log_requests).
CREATE TABLE admission_decisions (
    id             bigserial PRIMARY KEY,
    at             timestamptz NOT NULL,
    point          text NOT NULL CHECK (point IN ('inference', 'deploy', 'transfer', 'federation')),
    generation     bigint NOT NULL,
    plugin         text NOT NULL,
    version        text NOT NULL,
    mode           text NOT NULL CHECK (mode IN ('enforce', 'monitor')),
    decision       text NOT NULL CHECK (decision IN ('allow', 'deny', 'patch', 'error')),
    code           text,
    monitor        boolean NOT NULL,
    key_id         text NOT NULL,
    request_sha256 text NOT NULL,
    request        jsonb,
    replica        text NOT NULL
);

-- Queries read one point by id (the cursor); pruning by age reads `at`.
CREATE INDEX admission_decisions_point_id ON admission_decisions (point, id);
CREATE INDEX admission_decisions_at ON admission_decisions (at);
