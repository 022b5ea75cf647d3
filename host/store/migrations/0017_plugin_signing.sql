-- Signed plugins: the keys a cluster trusts to sign components, and who
-- signed each registered version.

CREATE TABLE trusted_keys (
    -- The first 16 hex of the SHA-256 of the public key.
    id          text PRIMARY KEY,
    -- ed25519, 64 lowercase hex.
    public_key  text NOT NULL UNIQUE,
    name        text NOT NULL,
    comment     text,
    added_by    text NOT NULL,
    added_at    timestamptz NOT NULL DEFAULT now()
);

-- A version's signer is kept by public key, so a key removed from the trust
-- set (and perhaps added back later) is recognised when reading; the name
-- is the trusted key's name at upload, kept for "no longer trusted".
ALTER TABLE plugins
    ADD COLUMN signer_key_id      text,
    ADD COLUMN signer_public_key  text,
    ADD COLUMN signature          text,
    ADD COLUMN signer_name        text,
    ADD COLUMN signer_trusted_at_upload boolean NOT NULL DEFAULT false;
