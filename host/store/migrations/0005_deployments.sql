-- Deployments: a model revision served by an engine kind on N replicas,
-- each replica placed on a node with its GPUs.
CREATE TABLE deployments (
    id                 text PRIMARY KEY,
    model_id           text NOT NULL,
    revision           text NOT NULL,
    engine             text NOT NULL CHECK (engine IN ('reference', 'llama-cpp', 'vllm')),
    served_model_name  text NOT NULL UNIQUE,
    replicas           integer NOT NULL CHECK (replicas >= 0),
    gpus_per_replica   integer NOT NULL DEFAULT 0 CHECK (gpus_per_replica >= 0),
    -- Per GPU: the operator's override, else the estimate from file sizes.
    gpu_memory_bytes   bigint NOT NULL DEFAULT 0 CHECK (gpu_memory_bytes >= 0),
    max_concurrency    integer NOT NULL DEFAULT 8 CHECK (max_concurrency > 0),
    token_delay_ms     integer NOT NULL DEFAULT 0 CHECK (token_delay_ms >= 0),
    -- binpack: fill the fullest node that fits; spread: the emptiest.
    strategy           text NOT NULL DEFAULT 'binpack' CHECK (strategy IN ('binpack', 'spread')),
    created_by         text NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (model_id, revision) REFERENCES model_revisions
);

CREATE TABLE deployment_replicas (
    id             text PRIMARY KEY,
    deployment_id  text NOT NULL REFERENCES deployments ON DELETE CASCADE,
    node_id        text NOT NULL REFERENCES nodes ON DELETE CASCADE,
    gpus           integer[] NOT NULL DEFAULT '{}',
    -- placed, staging, starting, ready, failed, stopping
    state          text NOT NULL DEFAULT 'placed',
    detail         text,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX deployment_replicas_node ON deployment_replicas (node_id);

-- Maintenance: no new placements, replicas stay (a drain moves them away).
ALTER TABLE nodes ADD COLUMN maintenance boolean NOT NULL DEFAULT false;
