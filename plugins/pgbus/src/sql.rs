//! Every statement the engine runs. Each is one statement (the host runs it
//! in its own transaction, with the extended protocol), and every result
//! column is cast to `text` or `bytea`.

/// Creates the spill table and its retention index if missing. Two frontends
/// starting together would race in `CREATE TABLE IF NOT EXISTS` (a unique
/// violation on the catalog), so the creation holds a transaction-level
/// advisory lock, named like the store's other locks. The "already exists,
/// skipping" notices of every later start are silenced for this statement.
pub const CREATE_SPILL_TABLE: &str = "DO $$ BEGIN \
PERFORM set_config('client_min_messages', 'warning', true); \
PERFORM pg_advisory_xact_lock(hashtext('switchyard:carrier-spill')); \
CREATE TABLE IF NOT EXISTS switchyard_carrier_spill (\
id bigserial primary key, \
subject text not null, \
payload bytea not null, \
created_at timestamptz not null default now()); \
CREATE INDEX IF NOT EXISTS switchyard_carrier_spill_created_at \
ON switchyard_carrier_spill (created_at); \
END $$";

/// Whether the listener's LISTEN is in force (`$1` channel), answered `1`.
/// The host runs a connection's LISTEN and queries in order, so the answer
/// also says that the LISTEN has run: only then is the carrier ready.
pub const CHECK_LISTENING: &str =
    "SELECT count(*)::text FROM pg_listening_channels() AS c WHERE c = $1";

/// One inline notification: `$1` channel, `$2` text.
pub const NOTIFY: &str = "SELECT pg_notify($1, $2)::text";

/// Several inline notifications in one transaction, so that they take
/// PostgreSQL's global notify lock once: `$1` channel, `$2` the texts joined
/// by newlines (which no notification text contains). Answers the count.
pub const NOTIFY_BATCH: &str =
    "SELECT count(pg_notify($1, n))::text FROM unnest(string_to_array($2, E'\\n')) AS n";

/// Spills one message: inserts the payload and notifies the marker naming
/// the new row in the same statement, so the row exists (committed) before
/// anyone hears of it. `$1` subject, `$2` payload, `$3` channel, `$4` the
/// marker's tail (`<subject> <reply-to> <headers>`).
pub const SPILL: &str = "WITH s AS (\
INSERT INTO switchyard_carrier_spill (subject, payload) VALUES ($1, $2) RETURNING id) \
SELECT pg_notify($3, 's ' || s.id::text || ' ' || $4)::text FROM s";

/// Fetches a spilled payload (`$1` row id); no row once retention deleted it.
pub const READ_SPILL: &str = "SELECT payload FROM switchyard_carrier_spill WHERE id = $1";

/// Deletes spill rows older than `$1` seconds by the database's clock;
/// answers how many.
pub const EXPIRE_SPILL: &str = "WITH d AS (\
DELETE FROM switchyard_carrier_spill \
WHERE created_at < now() - make_interval(secs => $1::bigint) RETURNING 1) \
SELECT count(*)::text FROM d";
