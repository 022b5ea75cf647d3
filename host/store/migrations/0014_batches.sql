-- The OpenAI Batch API on one cluster: uploaded files, batches, and one row
-- per input line. The rows are the truth a batch runs from: whichever
-- replica drives a batch (under a lease in its row) dispatches the lines
-- that are not done and whose lease lapsed; whichever replica runs a line
-- records its outcome with a conditional UPDATE (the first writer wins).
-- Output and error files are rows without content: they are served from
-- the lines, so an answer's body is stored once.
CREATE TABLE batch_files (
    id         text PRIMARY KEY,
    purpose    text NOT NULL CHECK (purpose IN ('batch', 'batch_output')),
    filename   text NOT NULL,
    bytes      bigint NOT NULL CHECK (bytes >= 0),
    -- An upload's JSONL; NULL for an output or error file.
    content    bytea,
    -- An output or error file: its batch, and which of the two it is.
    batch_id   text,
    kind       text NOT NULL DEFAULT 'upload' CHECK (kind IN ('upload', 'output', 'error')),
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'upload') = (content IS NOT NULL))
);

CREATE TABLE batches (
    id                text PRIMARY KEY,
    endpoint          text NOT NULL,
    input_file_id     text NOT NULL REFERENCES batch_files (id),
    completion_window text NOT NULL,
    status            text NOT NULL CHECK (status IN ('validating', 'failed', 'in_progress',
                          'finalizing', 'completed', 'expired', 'cancelling', 'cancelled')),
    metadata          jsonb,
    -- The caller whose key the lines are admitted as.
    key_id            text NOT NULL,
    scopes            text[] NOT NULL,
    -- The models the lines name: how many of their replicas' slots a batch fills.
    models            text[] NOT NULL,
    output_file_id    text,
    error_file_id     text,
    total             integer NOT NULL CHECK (total >= 0),
    completed         integer NOT NULL DEFAULT 0,
    failed            integer NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    in_progress_at    timestamptz,
    finalizing_at     timestamptz,
    completed_at      timestamptz,
    failed_at         timestamptz,
    expired_at        timestamptz,
    expires_at        timestamptz NOT NULL,
    cancelling_at     timestamptz,
    cancelled_at      timestamptz,
    -- The replica driving the batch, until when (another takes over after).
    driver            text,
    driver_until      timestamptz
);
CREATE INDEX batches_created ON batches (created_at DESC, id DESC);
CREATE INDEX batches_active ON batches (status) WHERE status IN ('validating', 'in_progress', 'cancelling', 'finalizing');

CREATE TABLE batch_lines (
    batch_id     text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
    line         integer NOT NULL,
    custom_id    text NOT NULL,
    body         bytea NOT NULL,
    -- pending: to dispatch (after lease_until, when set: a retry's pause);
    -- dispatched: a unit is on the queue; running: a replica runs it;
    -- completed (2xx) and failed: done; cancelled and expired: never ran.
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'dispatched',
                     'running', 'completed', 'failed', 'cancelled', 'expired')),
    -- Runs that count towards the limit (a run that found no free replica
    -- gives its attempt back); and dispatches, each a unit of its own id.
    attempts     integer NOT NULL DEFAULT 0,
    dispatches   integer NOT NULL DEFAULT 0,
    lease_until  timestamptz,
    status_code  integer,
    request_id   text,
    -- The answer's body (JSON), stored once and served as the output.
    response     bytea,
    -- Why the line got no answer: {"code", "message"}.
    error        jsonb,
    finished_at  timestamptz,
    PRIMARY KEY (batch_id, line),
    UNIQUE (batch_id, custom_id)
);
CREATE INDEX batch_lines_open ON batch_lines (batch_id, line)
    WHERE state IN ('pending', 'dispatched', 'running');
-- The lines in flight, counted at every pass of the driver: at most a window.
CREATE INDEX batch_lines_in_flight ON batch_lines (batch_id)
    WHERE state IN ('dispatched', 'running');
