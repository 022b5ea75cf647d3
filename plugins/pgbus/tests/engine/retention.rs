//! Deleting expired spill rows, by the database's clock, from the publisher.

use switchyard_plugin_pgbus::{Action, LogLevel, Param, RETENTION_INTERVAL_MS, sql};

use crate::support::*;

#[test]
fn the_tick_deletes_old_rows_on_the_publisher() {
    let mut e = ready(r#"{"retention_seconds": 90}"#);
    let out = e.timer(RETENTION_INTERVAL_MS);
    let q = only_query(&out);
    assert_eq!(q.connection, PUBLISHER);
    assert_eq!(q.sql, sql::EXPIRE_SPILL);
    assert!(q.sql.contains(
        "DELETE FROM switchyard_carrier_spill WHERE created_at < now() - make_interval(secs => $1::bigint)"
    ));
    assert_eq!(q.params, vec![Param::Int(90)]);
    assert_eq!(timer(&out), Some(RETENTION_INTERVAL_MS));

    // One deletion at a time.
    assert!(queries(&e.timer(2 * RETENTION_INTERVAL_MS)).is_empty());
    let out = e.answered(q.id, Ok(rows(b"12")), 2 * RETENTION_INTERVAL_MS);
    assert!(matches!(&out[..], [Action::Log(LogLevel::Debug, m)] if m.contains("deleted 12")));
    assert_eq!(
        only_query(&e.timer(3 * RETENTION_INTERVAL_MS)).sql,
        sql::EXPIRE_SPILL
    );
}

#[test]
fn no_deletion_without_a_usable_publisher() {
    let (mut e, _) = start("{}");
    let out = e.timer(RETENTION_INTERVAL_MS);
    assert!(queries(&out).is_empty());
    assert_eq!(timer(&out), Some(RETENTION_INTERVAL_MS), "the tick goes on");
}

#[test]
fn a_failed_deletion_is_logged_and_retried_on_the_next_tick() {
    let mut e = ready("{}");
    let q = only_query(&e.timer(RETENTION_INTERVAL_MS));
    let out = e.answered(q.id, Err("lock timeout".into()), RETENTION_INTERVAL_MS + 1);
    assert!(matches!(&out[..], [Action::Log(LogLevel::Warn, m)] if m.contains("lock timeout")));
    assert_eq!(
        only_query(&e.timer(2 * RETENTION_INTERVAL_MS)).sql,
        sql::EXPIRE_SPILL
    );
}

#[test]
fn a_deletion_lost_with_the_publisher_does_not_block_the_next() {
    let mut e = ready("{}");
    only_query(&e.timer(RETENTION_INTERVAL_MS));
    e.closed(PUBLISHER, "gone", RETENTION_INTERVAL_MS + 1);
    let create = only_query(&e.opened(11, RETENTION_INTERVAL_MS + 2));
    e.answered(create.id, Ok(Vec::new()), RETENTION_INTERVAL_MS + 3);
    let q = only_query(&e.timer(2 * RETENTION_INTERVAL_MS));
    assert_eq!((&*q.sql, q.connection), (sql::EXPIRE_SPILL, 11));
}

#[test]
fn the_one_timer_is_the_earliest_deadline() {
    let mut e = ready("{}");
    // A request due before the tick moves the timer closer ...
    let out = e
        .request(1, "jobs.svc", &[], Vec::new(), 3000, 1000)
        .unwrap();
    assert_eq!(timer(&out), Some(3000));
    // ... a later one does not move it.
    let out = e
        .request(2, "jobs.svc", &[], Vec::new(), 60_000, 1000)
        .unwrap();
    assert_eq!(timer(&out), None);
    // After it fires, the next earliest is set.
    let out = e.timer(4000);
    assert_eq!(timer(&out), Some(RETENTION_INTERVAL_MS - 4000));
    let out = e.timer(RETENTION_INTERVAL_MS);
    assert_eq!(timer(&out), Some(RETENTION_INTERVAL_MS));
    // A tick missed (the host was slow) is not made up: the next follows.
    let out = e.timer(60_000);
    assert_eq!(timer(&out), Some(1000), "request 2 is due at 61 s");
    let out = e.timer(61_000);
    assert_eq!(timer(&out), Some(60_000 + RETENTION_INTERVAL_MS - 61_000));
}
