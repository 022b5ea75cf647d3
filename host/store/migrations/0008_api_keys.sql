-- The API's own records: the admin key is marked by what it is, not by its
-- name, and the registry stores every kind of component the host serves.

-- Set only on the key the server mints (or takes from SWITCHYARD_ADMIN_TOKEN)
-- at first start. A key an admin creates and names `admin` is just a key;
-- before this column, a second live key so named stopped every replica from
-- starting (the check expected one row).
ALTER TABLE api_keys ADD COLUMN bootstrap boolean NOT NULL DEFAULT false;
-- An existing database: the oldest live key named `admin` holding the admin
-- scope is the one the server minted.
UPDATE api_keys SET bootstrap = true
WHERE id = (
    SELECT id FROM api_keys
    WHERE name = 'admin' AND revoked_at IS NULL AND 'admin' = ANY (scopes)
    ORDER BY created_at, id
    LIMIT 1
);
-- At most one live bootstrap key, whatever races.
CREATE UNIQUE INDEX api_keys_one_live_bootstrap ON api_keys (bootstrap)
    WHERE bootstrap AND revoked_at IS NULL;

-- The tunnel carrier's multiplexer is a served world too; uploading it was
-- a CHECK violation (a 500).
ALTER TABLE plugins DROP CONSTRAINT IF EXISTS plugins_kind_check;
ALTER TABLE plugins ADD CONSTRAINT plugins_kind_check
    CHECK (kind IN ('policy', 'grant', 'carrier', 'tunnel'));
