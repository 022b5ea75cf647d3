-- The cluster's carrier set: one row. `carrier` names a set of the carrier
-- crate's catalog (`nats`, `tunnel`: `switchyard_carrier::set::SetName`); it
-- is not constrained here: a row naming a set this build does not run must
-- stop a replica's start with a clear message, not fail an insert elsewhere.
-- `state` is `switchyard_protocol::state::CarrierRowState`; the components
-- the set runs come from the plugin registry (newest version of each).
CREATE TABLE cluster_carrier (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    carrier     text NOT NULL,
    epoch       bigint NOT NULL DEFAULT 1 CHECK (epoch > 0),
    state       text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'switching')),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Where other replicas reach a replica (to relay a stream to the worker
-- session it holds).
ALTER TABLE instances ADD COLUMN address text;

-- Secrets shared by the replicas of one cluster (they share this database):
-- the relay secret a replica presents to another.
CREATE TABLE cluster_secrets (
    name        text PRIMARY KEY,
    secret      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO cluster_secrets (name, secret)
    VALUES ('relay', encode(sha256(gen_random_uuid()::text::bytea || clock_timestamp()::text::bytea), 'hex'));
