-- Federation: this cluster's identity (the public half only: the private
-- key lives in a file, never here), its peers, the resources it offers,
-- requests for access, grants both ways with the owner's counters, the
-- slots calls in flight hold, operation receipts, and managed services.

CREATE TABLE federation_identity (
    singleton         boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    cluster_id        text NOT NULL,
    label             text NOT NULL,
    -- Null until a replica with a key stored it; a replica whose key has
    -- another public key serves no federation.
    public_key        text,
    join_token_sha256 bytea,
    join_token_at     timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE federation_peers (
    id              text PRIMARY KEY,
    label           text NOT NULL UNIQUE,
    -- Where this cluster dials the peer; null when the peer dials.
    url             text UNIQUE,
    cluster_id      text NOT NULL UNIQUE,
    public_key      text NOT NULL,
    link_state      text NOT NULL DEFAULT 'down' CHECK (link_state IN ('up', 'connecting', 'down')),
    link_error      text,
    -- The replica holding the link (others relay through it).
    link_instance   text,
    link_changed_at timestamptz NOT NULL DEFAULT now(),
    verified_at     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE federation_offers (
    id         text PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('service', 'model', 'machine', 'runtime')),
    resource   jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE federation_requests (
    id         text PRIMARY KEY,
    peer_id    text NOT NULL REFERENCES federation_peers (id) ON DELETE CASCADE,
    direction  text NOT NULL CHECK (direction IN ('incoming', 'outgoing')),
    operations text[] NOT NULL,
    note       text NOT NULL DEFAULT '',
    state      text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved')),
    grant_id   text,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE federation_grants (
    id                text PRIMARY KEY,
    peer_id           text NOT NULL REFERENCES federation_peers (id) ON DELETE CASCADE,
    -- outgoing: this cluster owns the resources; incoming: the peer does.
    direction         text NOT NULL CHECK (direction IN ('outgoing', 'incoming')),
    terms             jsonb NOT NULL,
    owner_signature   text NOT NULL,
    grantee_signature text,
    state             text NOT NULL CHECK (state IN ('offered', 'active', 'revoked')),
    expires_at        timestamptz NOT NULL,
    max_concurrent    integer NOT NULL CHECK (max_concurrent >= 0),
    max_requests      bigint NOT NULL CHECK (max_requests >= 0),
    max_model_bytes   bigint NOT NULL CHECK (max_model_bytes >= 0),
    -- The owner's counters, charged in one conditional UPDATE each call.
    in_flight         integer NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    requests_used     bigint NOT NULL DEFAULT 0,
    model_bytes_used  bigint NOT NULL DEFAULT 0,
    tokens_used       bigint NOT NULL DEFAULT 0,
    stop_on_revoke    boolean NOT NULL DEFAULT false,
    verified_at       timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    completed_at      timestamptz,
    revoked_at        timestamptz
);

-- The concurrency slots each replica holds: a replica that dies without
-- releasing its slots has them released by another.
CREATE TABLE federation_slots (
    instance_id text NOT NULL,
    grant_id    text NOT NULL REFERENCES federation_grants (id) ON DELETE CASCADE,
    held        integer NOT NULL CHECK (held >= 0),
    PRIMARY KEY (instance_id, grant_id)
);

CREATE TABLE federation_operations (
    peer_id        text NOT NULL REFERENCES federation_peers (id) ON DELETE CASCADE,
    id             text NOT NULL,
    grant_id       text NOT NULL REFERENCES federation_grants (id) ON DELETE CASCADE,
    request_sha256 text NOT NULL,
    state          text NOT NULL CHECK (state IN ('running', 'done')),
    status         integer,
    outcome        jsonb,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (peer_id, id)
);

-- The nodes a deployment may run on (empty: any): a managed service stays
-- on the machines its grant names.
ALTER TABLE deployments ADD COLUMN nodes text[] NOT NULL DEFAULT '{}';

-- A managed service: a deployment made through an inference:manage grant.
CREATE TABLE federation_services (
    id            text PRIMARY KEY,
    grant_id      text NOT NULL,
    deployment_id text NOT NULL,
    spec          jsonb NOT NULL,
    revision      bigint NOT NULL DEFAULT 1,
    state         text NOT NULL DEFAULT 'stopped' CHECK (state IN ('stopped', 'running', 'draining')),
    created_at    timestamptz NOT NULL DEFAULT now()
);
