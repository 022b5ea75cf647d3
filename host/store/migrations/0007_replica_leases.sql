-- Replica leases: a replica in a transient state (staging, stopping) holds
-- it until `state_until`, a time from the database clock that the frontend
-- doing the work renews while it progresses. The scheduler recovers a
-- replica whose lease ran out (its frontend died or lost the work): staging
-- is tried again, stopping is stopped again and then forgotten.
ALTER TABLE deployment_replicas ADD COLUMN state_until timestamptz;
-- A failed replica is tried again at `retry_at`; `failures` counts the
-- failures in a row (the backoff doubles with each), reset once it is ready.
ALTER TABLE deployment_replicas ADD COLUMN failures integer NOT NULL DEFAULT 0;
ALTER TABLE deployment_replicas ADD COLUMN retry_at timestamptz;
-- A deleted deployment's replicas outlive its row: they go through
-- `stopping` (their engines drained, their GPUs still counted) until the
-- worker confirms, so the replica no longer cascades with the deployment.
ALTER TABLE deployment_replicas
    DROP CONSTRAINT IF EXISTS deployment_replicas_deployment_id_fkey;
CREATE INDEX deployment_replicas_deployment ON deployment_replicas (deployment_id);
-- Rows from before leases: staging ones are recovered by the next pass,
-- stopping ones are unclaimed (NULL) and stopped again.
UPDATE deployment_replicas SET state_until = now() WHERE state = 'staging';
