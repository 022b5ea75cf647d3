-- Verified model copies from peer clusters: one row per copy of a peer's
-- model revision, its files with the durable offset of each (advanced
-- only after the partial bytes are fsync'd), and which replica runs it.
-- A copy outlives its peer and grant: the peer is kept as its label (the
-- id is set null when the peer is forgotten) and nothing cascades into
-- the model library.

CREATE TABLE federation_copies (
    id             text PRIMARY KEY,
    peer_label     text NOT NULL,
    peer_id        text REFERENCES federation_peers (id) ON DELETE SET NULL,
    grant_id       text NOT NULL,
    model_id       text NOT NULL,
    revision       text NOT NULL,
    licence        text,
    state          text NOT NULL CHECK (state IN
                       ('running', 'waiting', 'paused', 'interrupted', 'stopped', 'complete')),
    code           text,
    message        text,
    -- The key that started or last resumed it (the transfer chain's caller).
    started_by     text NOT NULL,
    -- The replica running it and when it last said so: another replica
    -- takes over an active copy whose runner went silent.
    runner         text,
    runner_seen_at timestamptz,
    -- The current acquisition's automatic reconnects: [{at, waited_ms}].
    reconnects     jsonb NOT NULL DEFAULT '[]',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
-- At most one unfinished copy of a revision from a peer: a second start resumes it.
CREATE UNIQUE INDEX federation_copies_unfinished
    ON federation_copies (peer_label, model_id, revision) WHERE state <> 'complete';

CREATE TABLE federation_copy_files (
    copy_id  text NOT NULL REFERENCES federation_copies (id) ON DELETE CASCADE,
    path     text NOT NULL,
    size     bigint NOT NULL CHECK (size >= 0),
    sha256   text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    durable  bigint NOT NULL DEFAULT 0 CHECK (durable >= 0 AND durable <= size),
    complete boolean NOT NULL DEFAULT false,
    PRIMARY KEY (copy_id, path)
);
