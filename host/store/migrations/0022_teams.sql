-- Teams: the unit budgets and usage reports are kept by. A key belongs to
-- at most one. A team with live keys cannot be deleted (the store checks
-- under the team row's lock, the API answers 409); deleting one clears the
-- team of its revoked keys.

CREATE TABLE teams (
    name        text PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE api_keys ADD COLUMN team text REFERENCES teams (name) ON DELETE SET NULL;
CREATE INDEX api_keys_team ON api_keys (team);
