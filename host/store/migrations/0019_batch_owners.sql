-- Batch files and batches belong to the key that made them (the outside
-- audit, issue 29): every read, list, cancel and delete is filtered by the
-- owner, and anyone else is told "not found". `owner` is a key id (or
-- `peer:<label>` for a peer's job); NULL marks a row made before owners
-- were kept that no batch claims: only an admin key sees it.
ALTER TABLE batch_files ADD COLUMN owner text;
UPDATE batch_files f SET owner = b.key_id FROM batches b WHERE f.batch_id = b.id;
UPDATE batch_files f SET owner = b.key_id FROM batches b
 WHERE f.owner IS NULL AND b.input_file_id = f.id;
CREATE INDEX batch_files_owner ON batch_files (owner) WHERE kind = 'upload';

-- An upload expires (OpenAI's `expires_after`, 30 days by default for
-- batch files); a periodic sweep deletes it, and reads ignore it at once.
-- Output and error files hold no bytes of their own and never expire.
ALTER TABLE batch_files ADD COLUMN expires_at timestamptz;
UPDATE batch_files SET expires_at = created_at + interval '30 days' WHERE kind = 'upload';
CREATE INDEX batch_files_expiry ON batch_files (expires_at) WHERE expires_at IS NOT NULL;

-- An upload is written as it streams in, in chunks, so that a replica
-- never holds a whole file; it is invisible until complete, and the sweep
-- deletes one abandoned mid-way.
ALTER TABLE batch_files ADD COLUMN complete boolean NOT NULL DEFAULT true;
CREATE TABLE batch_file_chunks (
    file_id text NOT NULL REFERENCES batch_files (id) ON DELETE CASCADE,
    seq     integer NOT NULL CHECK (seq >= 0),
    data    bytea NOT NULL,
    PRIMARY KEY (file_id, seq)
);
INSERT INTO batch_file_chunks (file_id, seq, data)
SELECT id, 0, content FROM batch_files WHERE content IS NOT NULL;
-- Drops the CHECK that tied `content` to uploads with it.
ALTER TABLE batch_files DROP COLUMN content;

-- A batch keeps its lines, so its input file may be deleted once it exists.
ALTER TABLE batches DROP CONSTRAINT IF EXISTS batches_input_file_id_fkey;
CREATE INDEX batches_owner ON batches (key_id, created_at DESC, id DESC);
-- Why a batch ended as it did when no line says it (its key revoked):
-- OpenAI's `errors` list.
ALTER TABLE batches ADD COLUMN errors jsonb;

-- A job this cluster made on a peer belongs to the local key that made it;
-- NULL (made before owners were kept): only an admin key sees it.
ALTER TABLE federation_job_projections ADD COLUMN key_id text;
