-- The model library: a revision is a manifest of files, each named by its
-- SHA-256; the bytes live content-addressed under the replicas' library
-- folder (blobs/sha256/<hex>), written only once verified.
CREATE TABLE model_revisions (
    model_id     text NOT NULL,
    revision     text NOT NULL,
    licence      text,
    imported_by  text NOT NULL,
    imported_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model_id, revision)
);

CREATE TABLE model_files (
    model_id  text NOT NULL,
    revision  text NOT NULL,
    path      text NOT NULL,
    size      bigint NOT NULL CHECK (size >= 0),
    sha256    text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    PRIMARY KEY (model_id, revision, path),
    FOREIGN KEY (model_id, revision) REFERENCES model_revisions ON DELETE CASCADE
);
CREATE INDEX model_files_sha256 ON model_files (sha256);
