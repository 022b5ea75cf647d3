//! Database connections for carriers that ride on PostgreSQL (pgbus): the
//! host dials its own database, runs the plugin's LISTENs and queries in
//! order, and hands notifications over in batches. The listener never
//! blocks: notifications wait in a bounded queue and overflow is counted.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use switchyard_runtime::carrier::{Notification, Param, Query};
use switchyard_store::DatabaseUrl;
use tokio::sync::mpsc;
use tokio_postgres::Statement;
use tokio_postgres::types::{ToSql, Type};

use crate::reactor::{Event, Events};

/// Notifications waiting for the reactor; more are dropped and counted.
pub const NOTIFICATION_QUEUE: usize = 65_536;

/// Notifications handed to the plugin in one call at most.
const NOTIFICATION_BATCH: usize = 512;

/// Statements kept prepared on one connection. A carrier runs a few
/// statements over and over: a prepared one skips a round trip (an unnamed
/// statement is parsed, then bound) and PostgreSQL's parse and plan of every
/// run (4-5 % of its CPU in a pgbus burst). More distinct texts than this
/// start the cache afresh, so a plugin cannot grow it without bound.
const MAX_PREPARED: usize = 64;

enum Command {
    Listen(String),
    Query(Query),
}

/// One database connection of a carrier.
pub(crate) struct DbConnection {
    commands: mpsc::UnboundedSender<Command>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl DbConnection {
    /// Dials the database; reports `Opened`, then `Notified`s and `Answered`s, then one `Closed`.
    pub(crate) fn dial(
        io: &tokio::runtime::Handle,
        handle: u64,
        url: String,
        events: Events,
    ) -> Self {
        let (commands, mut inbox) = mpsc::unbounded_channel::<Command>();
        let (heard, mut queue) = mpsc::channel::<Notification>(NOTIFICATION_QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));

        // Hands queued notifications to the reactor in batches.
        let batcher = {
            let (events, dropped) = (events.clone(), dropped.clone());
            io.spawn(async move {
                while let Some(first) = queue.recv().await {
                    let mut batch = vec![first];
                    while batch.len() < NOTIFICATION_BATCH {
                        match queue.try_recv() {
                            Ok(n) => batch.push(n),
                            Err(_) => break,
                        }
                    }
                    let lost = dropped.swap(0, Ordering::Relaxed);
                    if events.send(Event::Notified(handle, batch, lost)).is_err() {
                        return;
                    }
                }
            })
        };

        let session = io.spawn(async move {
            // With TLS as the URL's `sslmode`, `sslrootcert`, `sslcert` and
            // `sslkey` ask, like every other connection of the host's.
            let url = match DatabaseUrl::parse(&url) {
                Ok(url) => url,
                Err(e) => {
                    let _ = events.send(Event::Closed(handle, e.to_string()));
                    return;
                }
            };
            let (client, mut connection) = match url.connect().await {
                Ok(pair) => pair,
                Err(e) => {
                    let _ = events.send(Event::Closed(handle, format!("connecting to the database: {e}")));
                    return;
                }
            };
            // Notifications arrive only while the connection is polled: poll it on its own.
            let (ended_tx, mut ended) = tokio::sync::oneshot::channel::<String>();
            tokio::spawn(async move {
                let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                let reason = loop {
                    match messages.next().await {
                        Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => {
                            let notification = Notification { channel: n.channel().into(), payload: n.payload().into() };
                            if heard.try_send(notification).is_err() {
                                dropped.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Some(Ok(_)) => {}
                        Some(Err(e)) => break format!("database connection: {e}"),
                        None => break "database connection closed".to_string(),
                    }
                };
                let _ = ended_tx.send(reason);
            });
            let _ = events.send(Event::Opened(handle));
            let mut prepared = HashMap::new();
            let reason = loop {
                tokio::select! {
                    reason = &mut ended => break reason.unwrap_or_else(|_| "database connection closed".into()),
                    command = inbox.recv() => match command {
                        Some(Command::Listen(channel)) => {
                            let sql = format!("LISTEN \"{}\"", channel.replace('"', "\"\""));
                            if let Err(e) = client.batch_execute(&sql).await {
                                break format!("LISTEN {channel}: {e}");
                            }
                        }
                        Some(Command::Query(query)) => {
                            let outcome = run(&client, &mut prepared, &query).await;
                            if events.send(Event::Answered(query.id, query.hold_column, outcome)).is_err() {
                                return;
                            }
                        }
                        None => return,
                    },
                }
            };
            let _ = events.send(Event::Closed(handle, reason));
        });
        Self {
            commands,
            tasks: vec![batcher, session],
        }
    }

    /// LISTEN on a channel.
    pub(crate) fn listen(&self, channel: String) {
        let _ = self.commands.send(Command::Listen(channel));
    }

    /// Runs a query (in order with the others of this connection).
    pub(crate) fn query(&self, query: Query) {
        let _ = self.commands.send(Command::Query(query));
    }

    /// Closes without reporting back.
    pub(crate) fn close(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

type Rows = Result<Vec<Vec<Option<Vec<u8>>>>, String>;

/// The prepared statement for `sql` on this connection, prepared now if new.
async fn statement(
    client: &tokio_postgres::Client,
    prepared: &mut HashMap<String, Statement>,
    sql: &str,
) -> Result<Statement, tokio_postgres::Error> {
    if let Some(statement) = prepared.get(sql) {
        return Ok(statement.clone());
    }
    let statement = client.prepare(sql).await?;
    if prepared.len() >= MAX_PREPARED {
        prepared.clear();
    }
    prepared.insert(sql.to_owned(), statement.clone());
    Ok(statement)
}

async fn run(
    client: &tokio_postgres::Client,
    prepared: &mut HashMap<String, Statement>,
    query: &Query,
) -> Rows {
    let params: Vec<Box<dyn ToSql + Sync + Send>> = query
        .params
        .iter()
        .map(|p| -> Box<dyn ToSql + Sync + Send> {
            match p {
                Param::Null => Box::new(None::<String>),
                Param::Text(t) => Box::new(t.clone()),
                Param::Bytes(b) => Box::new(b.clone()),
                Param::Int(i) => Box::new(*i),
                // The reactor puts a held payload's bytes in its place before
                // the query is sent here; one that was not is sent as NULL.
                Param::Payload(_) => Box::new(None::<Vec<u8>>),
            }
        })
        .collect();
    let refs: Vec<&(dyn ToSql + Sync)> = params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect();
    let statement = statement(client, prepared, &query.sql)
        .await
        .map_err(|e| format!("{e}"))?;
    let rows = match client.query(&statement, &refs).await {
        Ok(rows) => rows,
        Err(e) => {
            // Prepared again next time, in case the statement went stale
            // (a table made anew under it).
            prepared.remove(query.sql.as_str());
            return Err(format!("{e}"));
        }
    };
    rows.iter()
        .map(|row| {
            (0..row.len())
                .map(|i| match *row.columns()[i].type_() {
                    Type::BYTEA => row
                        .try_get::<_, Option<Vec<u8>>>(i)
                        .map_err(|e| e.to_string()),
                    Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR => row
                        .try_get::<_, Option<String>>(i)
                        .map(|v| v.map(String::into_bytes))
                        .map_err(|e| e.to_string()),
                    ref other => Err(format!(
                        "column {} has type {other}; cast it to text or bytea",
                        row.columns()[i].name()
                    )),
                })
                .collect()
        })
        .collect()
}
