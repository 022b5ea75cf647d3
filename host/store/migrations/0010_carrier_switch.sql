-- The live carrier switch. The one `cluster_carrier` row now carries a
-- change: `stable` (the active set runs; `draining` may still name the set a
-- change left), `prepare` (every replica builds `target` beside the active
-- set) and `commit` (the target is active; `draining` names the old set
-- until the change settles). Every move is a compare-and-set on `epoch`;
-- `changed_at` and `deadline` (the end of a prepare, or of a drain) come
-- from the database clock, so no replica decides on its own clock.
-- `plugins`, `target_plugins` and `draining_plugins` pin each set's
-- components: {name: {version, sha256}}.
ALTER TABLE cluster_carrier DROP CONSTRAINT IF EXISTS cluster_carrier_state_check;
UPDATE cluster_carrier SET state = 'stable';
ALTER TABLE cluster_carrier ALTER COLUMN state SET DEFAULT 'stable';
ALTER TABLE cluster_carrier ADD CONSTRAINT cluster_carrier_state_check
    CHECK (state IN ('stable', 'prepare', 'commit'));
ALTER TABLE cluster_carrier RENAME COLUMN updated_at TO changed_at;
ALTER TABLE cluster_carrier
    ADD COLUMN plugins          jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN target           text,
    ADD COLUMN target_plugins   jsonb,
    ADD COLUMN draining         text,
    ADD COLUMN draining_plugins jsonb,
    ADD COLUMN deadline         timestamptz,
    ADD COLUMN forced           boolean NOT NULL DEFAULT false,
    ADD COLUMN change_id        bigint;

-- Every change, with its outcome and phase times (metrics and status).
CREATE TABLE carrier_changes (
    id           bigserial PRIMARY KEY,
    from_set     text NOT NULL,
    from_plugins jsonb NOT NULL,
    to_set       text NOT NULL,
    to_plugins   jsonb NOT NULL,
    forced       boolean NOT NULL,
    requested_by text NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now(),
    committed_at timestamptz,
    settled_at   timestamptz,
    -- NULL while under way; then settled or aborted.
    outcome      text CHECK (outcome IN ('settled', 'aborted')),
    reason       text
);

-- What each replica built of the row, the epoch it acted on, and per set
-- whether it can build it (refreshed on request: `report_at`).
ALTER TABLE instances
    ADD COLUMN version       text NOT NULL DEFAULT '',
    ADD COLUMN carrier_epoch bigint NOT NULL DEFAULT 0,
    ADD COLUMN built         jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN can_build     jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN report_at     timestamptz;

-- What a worker reports of its carriers (NULL: it never said), and why a
-- node is demoted: not attached to the active set after a change settled.
ALTER TABLE nodes
    ADD COLUMN attached       text[],
    ADD COLUMN epoch_seen     bigint,
    ADD COLUMN cannot_follow  jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN demoted_reason text;

-- The cluster's settings (one row): NATS URLs and the waits of a change.
-- Read as `switchyard_protocol::carrier::ClusterSettings`; absent keys take
-- their defaults.
CREATE TABLE cluster_settings (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    settings   jsonb NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO cluster_settings DEFAULT VALUES;
