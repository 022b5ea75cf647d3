-- Batch jobs across clusters. Every job has one owner cluster, which stores
-- and runs all of it. A job a peer made here through a grant keeps the peer
-- and the grant: the owner answers only that peer about it, and revoking
-- the grant cancels it. A job this cluster made on a peer is projected here:
-- the summary the owner last answered, with when it was synced.
ALTER TABLE batches ADD COLUMN peer_id text REFERENCES federation_peers (id) ON DELETE SET NULL;
ALTER TABLE batches ADD COLUMN grant_id text;
CREATE INDEX batches_grant ON batches (grant_id) WHERE grant_id IS NOT NULL;

CREATE TABLE federation_job_projections (
    -- The owner's batch id.
    id         text PRIMARY KEY,
    peer_id    text NOT NULL REFERENCES federation_peers (id) ON DELETE CASCADE,
    -- The batch as the owner last answered it.
    summary    jsonb NOT NULL,
    -- Its output and error files (their content is read from the owner).
    files      text[] NOT NULL DEFAULT '{}',
    -- Not ended, as last synced.
    active     boolean NOT NULL,
    created_at bigint NOT NULL,
    synced_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX federation_job_projections_created ON federation_job_projections (created_at DESC, id DESC);
CREATE INDEX federation_job_projections_active ON federation_job_projections (peer_id) WHERE active;
CREATE INDEX federation_job_projections_files ON federation_job_projections USING gin (files);

-- Whether peers may choose this cluster as the owner of new jobs; kept
-- here so that a restart (connected or not) keeps what the operator said.
CREATE TABLE federation_eligibility (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    state      text NOT NULL CHECK (state IN ('eligible', 'maintenance', 'draining')),
    reason     text NOT NULL DEFAULT '',
    changed_at timestamptz NOT NULL DEFAULT now()
);
