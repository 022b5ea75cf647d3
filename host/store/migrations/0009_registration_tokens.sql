-- Registration tokens expire and are counted; a node's name is taken over
-- only with its credential, or after an admin released it.

ALTER TABLE registration_tokens
    ADD COLUMN expires_at  timestamptz,
    ADD COLUMN max_uses    integer CHECK (max_uses IS NULL OR max_uses > 0),
    ADD COLUMN uses        integer NOT NULL DEFAULT 0,
    ADD COLUMN last_used_at timestamptz;

-- Set by an admin's release; the next registration of the name clears it.
ALTER TABLE nodes ADD COLUMN registration_open boolean NOT NULL DEFAULT false;
