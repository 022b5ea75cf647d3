-- A join token expires and has a number of uses (one unless asked for
-- more); a token made before this migration expires a day after it was made.

ALTER TABLE federation_identity
    ADD COLUMN join_token_expires_at timestamptz,
    ADD COLUMN join_token_uses_left integer NOT NULL DEFAULT 1 CHECK (join_token_uses_left >= 0);

UPDATE federation_identity
    SET join_token_expires_at = coalesce(join_token_at, now()) + interval '24 hours'
    WHERE join_token_sha256 IS NOT NULL;
