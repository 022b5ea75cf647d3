-- The plugin platform: components, API keys, admission generations, replicas.

CREATE TABLE plugin_blobs (
    sha256      text PRIMARY KEY,
    bytes       bytea NOT NULL,
    size        bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE plugins (
    name        text NOT NULL,
    version     text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('policy', 'grant', 'carrier')),
    world       text NOT NULL,
    sha256      text NOT NULL REFERENCES plugin_blobs (sha256),
    size        bigint NOT NULL,
    uploaded_by text NOT NULL,
    uploaded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, version)
);

CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    name         text NOT NULL,
    token_sha256 bytea NOT NULL UNIQUE,
    scopes       text[] NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);

-- Every change of an admission point's chain is a new generation; the newest wins.
CREATE TABLE admission_generations (
    point       text NOT NULL CHECK (point IN ('inference', 'deploy', 'transfer', 'federation')),
    generation  bigint NOT NULL CHECK (generation > 0),
    chain       jsonb NOT NULL,
    note        text NOT NULL DEFAULT '',
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (point, generation)
);

-- Frontend replicas, stamped by the database clock.
CREATE TABLE instances (
    id            text PRIMARY KEY,
    hostname      text NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    heartbeat_at  timestamptz NOT NULL DEFAULT now()
);

-- Which generation each replica serves per point, and why a newer one failed there.
CREATE TABLE admission_replica_status (
    instance_id  text NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    point        text NOT NULL,
    generation   bigint NOT NULL,
    failed_generation bigint,
    error        text,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, point)
);
