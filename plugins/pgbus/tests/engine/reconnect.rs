//! Start-up, losing connections and reopening them.

use switchyard_plugin_pgbus::{Action, BACKOFF_START_MS, CarrierError, LogLevel, Param, sql};

use crate::support::*;

#[test]
fn start_opens_every_connection_and_sets_up_publisher_and_listener() {
    let (mut e, out) = start(r#"{"spill_readers": 2, "channel": "bus"}"#);
    assert_eq!(
        out,
        vec![
            Action::Open(1),
            Action::Open(2),
            Action::Open(3),
            Action::Open(4),
            Action::SetTimer(10_000),
        ]
    );
    let create = only_query(&e.opened(PUBLISHER, 5));
    assert_eq!(create.connection, PUBLISHER);
    assert_eq!(create.sql, create_tables());
    assert!(create.sql.contains("pg_advisory_xact_lock"));
    assert!(create.sql.contains("CREATE TABLE IF NOT EXISTS switchyard_carrier_spill (id bigserial primary key, subject text not null, payload bytea not null, created_at timestamptz not null default now())"));
    assert!(create.sql.contains("CREATE TABLE IF NOT EXISTS switchyard_carrier_queue (id bigserial primary key, unit_id text not null unique, subject text not null, headers text not null, payload bytea not null, enqueued_at timestamptz not null default now(), claimed_until timestamptz, attempts int not null default 0); CREATE INDEX IF NOT EXISTS switchyard_carrier_queue_subject_id ON switchyard_carrier_queue (subject, id);"));
    let out = e.opened(LISTENER, 5);
    assert_eq!(out[0], Action::Listen(LISTENER, "bus".into()));
    let check = only_query(&out);
    assert_eq!(
        (check.connection, &*check.sql),
        (LISTENER, sql::CHECK_LISTENING)
    );
    assert_eq!(check.params, vec![Param::Text("bus".into())]);
    assert_eq!(e.opened(3, 5), vec![]);

    // Ready only when both have answered.
    assert_eq!(e.answered(check.id, Ok(rows(b"1")), 6), vec![]);
    assert!(!e.is_ready());
    assert_eq!(
        e.answered(create.id, Ok(Vec::new()), 7),
        vec![Action::Ready]
    );
    assert!(e.is_ready());
}

#[test]
fn losing_the_publisher_emits_lost_and_reopens_then_ready_again() {
    let mut e = ready("{}");
    let out = e.closed(PUBLISHER, "server closed the connection", 1000);
    // Readers took 3..=10: the new publisher is 11, opened at once.
    assert_eq!(
        effects(&out),
        vec![
            Action::Lost(
                "the pgbus publisher connection closed (server closed the connection); reopening in 0 ms"
                    .into()
            ),
            Action::Open(11),
        ]
    );
    assert_eq!(
        e.publish("jobs.x", None, &[], Vec::new(), 1000),
        Err(CarrierError::NotConnected)
    );
    // A late event on the old handle is ignored.
    assert_eq!(e.closed(PUBLISHER, "again", 1000), vec![]);

    let create = only_query(&e.opened(11, 1010));
    assert_eq!(create.sql, create_tables());
    let out = e.answered(create.id, Ok(Vec::new()), 1020);
    assert!(matches!(&out[0], Action::Log(LogLevel::Info, m) if m.contains("reconnects=1")));
    assert_eq!(effects(&out), vec![Action::Ready]);
    assert_eq!(e.counters().reconnects, 1);
    assert!(e.publish("jobs.x", None, &[], Vec::new(), 1030).is_ok());
}

#[test]
fn repeated_failures_back_off() {
    let mut e = ready("{}");
    e.closed(PUBLISHER, "gone", 0);
    // The immediate reopen fails: the next waits about 250 ms.
    let out = e.closed(11, "connection refused", 0);
    assert_eq!(effects(&out), vec![], "no second lost");
    let first = timer(&out).expect("a timer for the reopen");
    assert!(
        (BACKOFF_START_MS * 3 / 4..=BACKOFF_START_MS).contains(&first),
        "{first}"
    );
    assert_eq!(effects(&e.timer(first - 1)), vec![]);
    assert_eq!(effects(&e.timer(first)), vec![Action::Open(12)]);
    let out = e.closed(12, "connection refused", first);
    let second = timer(&out).unwrap();
    assert!((375..=500).contains(&second), "{second}");
    assert_eq!(effects(&e.timer(first + second)), vec![Action::Open(13)]);

    // Once usable, the backoff starts over.
    let create = only_query(&e.opened(13, first + second));
    assert_eq!(
        effects(&e.answered(create.id, Ok(Vec::new()), first + second)),
        vec![Action::Ready]
    );
    let out = e.closed(13, "gone", 5000);
    assert!(effects(&out).contains(&Action::Open(14)));
}

#[test]
fn losing_the_listener_listens_again() {
    let mut e = ready("{}");
    let out = e.closed(LISTENER, "terminating connection", 1000);
    assert!(matches!(
        &effects(&out)[..],
        [Action::Lost(_), Action::Open(11)]
    ));
    let out = e.opened(11, 1001);
    assert_eq!(out[0], Action::Listen(11, "switchyard_bus".into()));
    let check = only_query(&out);
    assert_eq!(check.connection, 11);
    assert_eq!(
        effects(&e.answered(check.id, Ok(rows(b"1")), 1002)),
        vec![Action::Ready]
    );
    // Notifications come from the new listener only.
    e.subscribe(1, "jobs.*", None, 1002).unwrap();
    assert!(deliveries(&e.notified(LISTENER, vec![heard("m jobs.a   ")], 0, 1003)).is_empty());
    assert_eq!(
        deliveries(&e.notified(11, vec![heard("m jobs.a   ")], 0, 1003)).len(),
        1
    );
}

#[test]
fn a_listen_that_is_not_in_force_reopens_the_listener() {
    let (mut e, _) = start("{}");
    let out = e.opened(LISTENER, 0);
    let check = only_query(&out);
    let out = e.answered(check.id, Ok(rows(b"0")), 1);
    assert!(matches!(&out[0], Action::Log(LogLevel::Error, m) if m.contains("not in force")));
    assert_eq!(
        effects(&out),
        vec![Action::Close(LISTENER), Action::Open(11)]
    );
}

#[test]
fn a_failed_table_creation_reopens_the_publisher() {
    let (mut e, _) = start("{}");
    let create = only_query(&e.opened(PUBLISHER, 0));
    let out = e.answered(
        create.id,
        Err("permission denied for schema public".into()),
        1,
    );
    assert!(matches!(&out[0], Action::Log(LogLevel::Error, m) if m.contains("permission denied")));
    assert_eq!(
        effects(&out),
        vec![Action::Close(PUBLISHER), Action::Open(11)]
    );
    assert!(!e.is_ready());
}

#[test]
fn losing_a_reader_reads_again_elsewhere_and_is_not_a_lost_carrier() {
    let mut e = ready(r#"{"spill_readers": 2}"#);
    e.subscribe(1, "jobs.*", None, 1).unwrap();
    let out = e.notified(
        LISTENER,
        vec![
            heard("s 1 jobs.a  "),
            heard("s 2 jobs.b  "),
            heard("s 3 jobs.c  "),
        ],
        0,
        1,
    );
    let reads = queries(&out);
    assert_eq!(reads.len(), 2);
    let out = e.closed(reads[0].connection, "reset", 2);
    assert!(!out.iter().any(|a| matches!(a, Action::Lost(_))));
    assert!(e.is_ready());
    let reopened = 5;
    assert_eq!(effects(&out), vec![Action::Open(reopened)]);
    // The reopened reader takes the oldest read again.
    let again = only_query(&e.opened(reopened, 3));
    assert_eq!((read_id(&again), again.connection), (1, reopened));
    // The late answer of the closed reader's read is nobody's.
    assert!(effects(&e.answered(reads[0].id, Ok(rows(b"stale")), 3)).is_empty());
    let out = e.answered(again.id, Ok(rows(b"A")), 4);
    assert_eq!(read_id(&only_query(&out)), 3);
    assert_eq!(deliveries(&out).len(), 1);
    let out = e.answered(reads[1].id, Ok(rows(b"B")), 5);
    assert_eq!(deliveries(&out)[0].payload, b"B");
}

#[test]
fn messages_batched_when_the_publisher_closes_are_counted() {
    let mut e = ready("{}");
    e.publish("jobs.a", None, &[], Vec::new(), 1).unwrap();
    e.publish("jobs.b", None, &[], Vec::new(), 1).unwrap();
    e.publish("jobs.c", None, &[], Vec::new(), 1).unwrap();
    let out = e.closed(PUBLISHER, "gone", 2);
    assert!(out.iter().any(
        |a| matches!(a, Action::Log(LogLevel::Warn, m) if m.contains("2 message(s) unsent") && m.contains("1 unconfirmed"))
    ));
    assert_eq!(e.counters().failed_publishes, 2);
}

#[test]
fn spills_waiting_when_the_publisher_closes_are_counted() {
    let mut e = ready("{}");
    let big = vec![1u8; 65536];
    for subject in ["jobs.a", "jobs.b", "jobs.c", "jobs.d"] {
        e.publish(subject, None, &[], big.clone(), 1).unwrap();
    }
    let out = e.closed(PUBLISHER, "gone", 2);
    assert!(out.iter().any(
        |a| matches!(a, Action::Log(LogLevel::Warn, m) if m.contains("3 message(s) unsent") && m.contains("1 unconfirmed"))
    ));
    assert_eq!(e.counters().failed_publishes, 3);
}

#[test]
fn an_unknown_open_is_closed() {
    let mut e = ready("{}");
    assert_eq!(e.opened(77, 1), vec![Action::Close(77)]);
}

#[test]
fn a_new_configuration_closes_the_old_connections_and_numbers_after_them() {
    let e = ready(r#"{"spill_readers": 1}"#);
    let config = switchyard_plugin_pgbus::Config::parse(r#"{"spill_readers": 1}"#).unwrap();
    let (mut e, out) = e.replace(config, 1, 0);
    assert_eq!(
        out,
        vec![
            Action::Close(1),
            Action::Close(2),
            Action::Close(3),
            Action::Open(4),
            Action::Open(5),
            Action::Open(6),
            Action::SetTimer(10_000),
        ]
    );
    // Queries are numbered after the old engine's two setup queries.
    assert_eq!(only_query(&e.opened(4, 1)).id, 3);
}
