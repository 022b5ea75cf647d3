-- Placement inputs the workers report and deployments ask for: node labels
-- and a deployment's node selector (every selector pair must be among the
-- node's labels), the model files a node's placement cache holds (SHA-256s
-- of complete, verified files), why a deployment's replicas wait, and the
-- bytes a replica has staged.

-- A worker's labels (`--label key=value`), as an object of strings.
ALTER TABLE nodes ADD COLUMN labels jsonb NOT NULL DEFAULT '{}';
-- Lowercase hex SHA-256s of the complete files in the node's placement cache.
ALTER TABLE nodes ADD COLUMN files_held text[] NOT NULL DEFAULT '{}';

ALTER TABLE deployments ADD COLUMN node_selector jsonb NOT NULL DEFAULT '{}';
-- Set by the scheduler while a wanted replica cannot be placed; NULL once all are.
ALTER TABLE deployments ADD COLUMN pending_reason text;

-- Staging progress: bytes the node holds of the revision's files, of the total.
ALTER TABLE deployment_replicas ADD COLUMN staged_bytes bigint;
ALTER TABLE deployment_replicas ADD COLUMN staging_total_bytes bigint;
