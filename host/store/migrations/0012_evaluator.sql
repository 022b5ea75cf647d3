-- The federation grant evaluator is bound with generations exactly as an
-- admission chain is, in the same tables: its generations are rows of
-- admission_generations under the name 'grant-evaluator' (a chain of one
-- entry: plugin, version, pinned sha256, settings), and each replica reports
-- the generation it serves in admission_replica_status under that name.
-- One mechanism (append-only generations, NOTIFY on admission, rollback as a
-- new generation), one more name.
ALTER TABLE admission_generations DROP CONSTRAINT IF EXISTS admission_generations_point_check;
ALTER TABLE admission_generations ADD CONSTRAINT admission_generations_point_check
    CHECK (point IN ('inference', 'deploy', 'transfer', 'federation', 'grant-evaluator'));
