//! The bare spill scheme, the anchor of the pgbus burst, measured in the
//! same run on the same PostgreSQL: tokio-postgres clients doing what the
//! carrier does without it. Each publisher inserts a row and notifies its id
//! in one statement per message; each frontend listens on one connection and
//! fetches the rows it hears of on its readers. The table has the carrier's
//! spill table's columns, index and storage, so that the ratio measures the
//! carrier, not the schema.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::{Mutex, mpsc};
use tokio_postgres::Client;

const CHANNEL: &str = "bench_bare_burst";

const SETUP: &str = "DROP TABLE IF EXISTS bench_bare_spill; \
CREATE TABLE bench_bare_spill (\
id bigserial primary key, \
subject text not null, \
payload bytea not null, \
created_at timestamptz not null default now()); \
CREATE INDEX ON bench_bare_spill (created_at); \
ALTER TABLE bench_bare_spill ALTER COLUMN payload SET STORAGE EXTERNAL";

const SPILL: &str = "WITH s AS (\
INSERT INTO bench_bare_spill (subject, payload) VALUES ($1, $2) RETURNING id) \
SELECT pg_notify('bench_bare_burst', s.id::text)::text FROM s";

const READ: &str = "SELECT payload FROM bench_bare_spill WHERE id = $1";

/// The shape of a burst.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub messages: usize,
    pub payload: usize,
    pub publishers: usize,
    pub frontends: usize,
    pub readers: usize,
    /// How long a frontend waits for its next message before giving up.
    pub patience: Duration,
}

/// One frontend's result: messages fetched whole, and seconds from the
/// first publish to the last of them.
pub type Heard = (usize, f64);

/// TLS as the URL asks, as the carrier's own connections have it.
async fn connect(url: &str) -> Client {
    switchyard_tests::db::connect(url).await
}

/// Runs the burst; one result per frontend.
pub async fn burst(url: &str, shape: Shape) -> Vec<Heard> {
    let admin = connect(url).await;
    admin.batch_execute(SETUP).await.expect("bare table");
    // A checkpoint owed by earlier writes is not this burst's cost.
    admin.batch_execute("CHECKPOINT").await.expect("checkpoint");

    let mut heard = Vec::new();
    for _ in 0..shape.frontends {
        heard.push(frontend(url, shape).await);
    }
    let mut publishers = Vec::new();
    for _ in 0..shape.publishers {
        let client = connect(url).await;
        let statement = client.prepare(SPILL).await.expect("prepare spill");
        publishers.push((client, statement));
    }

    let started = Instant::now();
    let payload = switchyard_tests::bytes::pattern(shape.payload, 1).to_vec();
    let each = shape.messages / shape.publishers;
    let sends: Vec<_> = publishers
        .into_iter()
        .map(|(client, statement)| {
            let payload = payload.clone();
            tokio::spawn(async move {
                for _ in 0..each {
                    client
                        .execute(&statement, &[&"jobs.burst", &payload])
                        .await
                        .expect("bare spill");
                }
            })
        })
        .collect();
    let mut results = Vec::new();
    for (_listener, mut fetched) in heard {
        let mut count = 0;
        let mut last = 0.0;
        while count < each * shape.publishers {
            match tokio::time::timeout(shape.patience, fetched.recv()).await {
                Ok(Some((len, at))) if len == shape.payload => {
                    count += 1;
                    last = at.duration_since(started).as_secs_f64();
                }
                Ok(Some(_)) => {}
                _ => break,
            }
        }
        results.push((count, last));
    }
    for send in sends {
        send.await.expect("bare publisher");
    }
    results
}

/// A listening frontend with its readers; answers its listener (whose
/// connection ends when it is dropped) and the length of each row fetched,
/// with when.
async fn frontend(url: &str, shape: Shape) -> (Client, mpsc::UnboundedReceiver<(usize, Instant)>) {
    let (ids_tx, ids) = mpsc::unbounded_channel::<i64>();
    let (fetched_tx, fetched) = mpsc::unbounded_channel::<(usize, Instant)>();

    // Notifications arrive only while the connection is polled: poll it on its own.
    let (listener, mut connection) = switchyard_store::DatabaseUrl::parse(url)
        .expect("database URL")
        .connect()
        .await
        .expect("bare listener connects");
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let tokio_postgres::AsyncMessage::Notification(n) = message
                && let Ok(id) = n.payload().parse()
                && ids_tx.send(id).is_err()
            {
                return;
            }
        }
    });
    listener
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .expect("listen");

    // The readers take the next id heard, one at a time each.
    let ids = Arc::new(Mutex::new(ids));
    for _ in 0..shape.readers {
        let client = connect(url).await;
        let read = client.prepare(READ).await.expect("prepare read");
        let (ids, fetched_tx) = (ids.clone(), fetched_tx.clone());
        tokio::spawn(async move {
            loop {
                let Some(id) = ids.lock().await.recv().await else {
                    return;
                };
                let Ok(row) = client.query_one(&read, &[&id]).await else {
                    return;
                };
                let payload: &[u8] = row.get(0);
                if fetched_tx.send((payload.len(), Instant::now())).is_err() {
                    return;
                }
            }
        });
    }
    (listener, fetched)
}
