//! Every statement the engine runs. Each is one statement (the host runs it
//! in its own transaction, with the extended protocol), and every result
//! column is cast to `text` or `bytea`. The statements that name the queue
//! table are built once per configuration ([`TableStatements`]): a table name
//! cannot be a parameter, and the configuration admits only names that need
//! no quoting.

/// Serialises table creation between frontends that start together: two
/// `CREATE TABLE IF NOT EXISTS` of one table race (a unique violation on the
/// catalog). Named like the store's other locks.
const CREATE_LOCK: &str = "switchyard:carrier-spill";

/// Creates the spill table and its retention index if missing.
const CREATE_SPILL_TABLE: &str = "CREATE TABLE IF NOT EXISTS switchyard_carrier_spill (\
id bigserial primary key, \
subject text not null, \
payload bytea not null, \
created_at timestamptz not null default now()); \
CREATE INDEX IF NOT EXISTS switchyard_carrier_spill_created_at \
ON switchyard_carrier_spill (created_at);";

/// Stores `table`'s payloads out of line and never compressed (`STORAGE
/// EXTERNAL`), once: a row lives seconds, and compressing 64 KiB on insert
/// was the largest single cost of a spill burst (pglz_compress, 8 % of all
/// CPU in a profile of `scripts/bench.sh pgbus`). PostgreSQL 15 takes the
/// setting only by ALTER, which needs the table's owner: a login that does
/// not own it (a table another login made) leaves it as it is.
fn uncompressed_payloads(table: &str) -> String {
    format!(
        "IF (SELECT attstorage FROM pg_attribute \
WHERE attrelid = '{table}'::regclass AND attname = 'payload') <> 'e' THEN \
BEGIN ALTER TABLE {table} ALTER COLUMN payload SET STORAGE EXTERNAL; \
EXCEPTION WHEN insufficient_privilege THEN NULL; END; END IF;"
    )
}

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

/// Spills `count` messages in one transaction, so that they take
/// PostgreSQL's global notify lock (held across the commit's WAL flush) once:
/// `$1` channel, `$2` the marker tails joined by newlines, then one payload
/// each from `$3` on (separate parameters: no payload is copied to join
/// them, and the carrier world's parameters have no arrays). Each message's
/// row id is drawn first from the table's sequence, so that its notification
/// names its own row; the markers are notified in the tails' order, which is
/// the order subscribers hear them in. `m` is evaluated once (it is
/// referenced twice and draws from a sequence) and holds no payload; the
/// insert picks each row's payload parameter by position. Answers the count.
pub fn spill_batch(count: u64) -> String {
    let payloads: String = (1..=count)
        .map(|i| format!("WHEN {i} THEN ${}::bytea ", i + 2))
        .collect();
    format!(
        "WITH m AS (\
SELECT t.ord, nextval(pg_get_serial_sequence('switchyard_carrier_spill', 'id')) AS id, t.tail \
FROM unnest(string_to_array($2::text, E'\\n')) WITH ORDINALITY AS t(tail, ord) ORDER BY t.ord), \
i AS (INSERT INTO switchyard_carrier_spill (id, subject, payload) \
SELECT id, split_part(tail, ' ', 1), CASE ord {payloads}END FROM m) \
SELECT count(pg_notify($1::text, 's ' || n.id::text || ' ' || n.tail))::text \
FROM (SELECT id, tail FROM m ORDER BY ord) AS n"
    )
}

/// Fetches a spilled payload (`$1` row id); no row once retention deleted it.
pub const READ_SPILL: &str = "SELECT payload FROM switchyard_carrier_spill WHERE id = $1";

/// Deletes spill rows older than `$1` seconds by the database's clock;
/// answers how many.
pub const EXPIRE_SPILL: &str = "WITH d AS (\
DELETE FROM switchyard_carrier_spill \
WHERE created_at < now() - make_interval(secs => $1::bigint) RETURNING 1) \
SELECT count(*)::text FROM d";

/// The statements that name the queue table, for one configured name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableStatements {
    /// The publisher's setup: creates the spill table, the queue table and
    /// their indexes if missing, under one advisory lock; the "already exists,
    /// skipping" notices of every later start are silenced.
    pub create_tables: String,
    /// Queues a unit and wakes the consumers in one statement, so that no
    /// unit is queued without a wake: `$1` unit id, `$2` subject, `$3`
    /// headers (the notification format's header field), `$4` payload, `$5`
    /// wake channel. A unit id already queued is kept as it is (the producer
    /// retried) and still wakes. Answers 1 for a new unit, 0 for a repeat.
    pub enqueue: String,
    /// Claims the oldest units of `$1` that nobody holds (never claimed, or
    /// the lease ran out), at most `$2`, for `$3` seconds; rows another
    /// consumer is claiming are skipped, not waited for. Answers
    /// `id, unit_id, headers, payload`.
    pub claim: String,
    /// Deletes the acknowledged unit in row `$1`.
    pub ack: String,
}

impl TableStatements {
    /// The statements for the queue table `table` (a checked identifier).
    pub fn new(table: &str) -> Self {
        Self {
            create_tables: format!(
                "DO $$ BEGIN \
PERFORM set_config('client_min_messages', 'warning', true); \
PERFORM pg_advisory_xact_lock(hashtext('{CREATE_LOCK}')); \
{CREATE_SPILL_TABLE} \
CREATE TABLE IF NOT EXISTS {table} (\
id bigserial primary key, \
unit_id text not null unique, \
subject text not null, \
headers text not null, \
payload bytea not null, \
enqueued_at timestamptz not null default now(), \
claimed_until timestamptz, \
attempts int not null default 0); \
CREATE INDEX IF NOT EXISTS {table}_subject_id ON {table} (subject, id); \
{} {} \
END $$",
                uncompressed_payloads("switchyard_carrier_spill"),
                uncompressed_payloads(table),
            ),
            enqueue: format!(
                "WITH u AS (\
INSERT INTO {table} (unit_id, subject, headers, payload) VALUES ($1, $2, $3, $4) \
ON CONFLICT (unit_id) DO NOTHING RETURNING 1) \
SELECT (SELECT count(*) FROM u)::text, pg_notify($5, $2)::text"
            ),
            claim: format!(
                "UPDATE {table} \
SET claimed_until = now() + make_interval(secs => $3::bigint), attempts = attempts + 1 \
WHERE id IN (SELECT id FROM {table} \
WHERE subject = $1 AND (claimed_until IS NULL OR claimed_until < now()) \
ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) \
RETURNING id::text, unit_id, headers, payload"
            ),
            ack: format!("DELETE FROM {table} WHERE id = $1"),
        }
    }
}
