//! Hearing: decoding, matching, spill reads on the readers, arrival order,
//! and what is counted as lost.

use switchyard_plugin_pgbus::{
    Action, Delivery, Header, LogLevel, Notification, SPILL_READ_TIMEOUT_MS, sql,
};

use crate::support::*;

/// Publishes on `e` and hands what the database would notify back to it.
fn loop_back(
    e: &mut switchyard_plugin_pgbus::Engine,
    subject: &str,
    reply_to: Option<&str>,
    headers: &[Header],
    payload: Vec<u8>,
) -> Vec<Action> {
    let q = only_query(&e.publish(subject, reply_to, headers, payload, 1).unwrap());
    e.answered(q.id, Ok(rows(b"")), 1);
    e.notified(LISTENER, notified_by(&q, 1), 0, 1)
}

#[test]
fn inline_round_trip_with_reply_to_headers_and_binary_payload() {
    let mut e = ready("{}");
    e.subscribe(5, "jobs.*.progress", None, 1).unwrap();
    let headers = [Header::new("a", "1"), Header::new("b", "x y,z:\u{e9}")];
    let out = loop_back(
        &mut e,
        "jobs.7.progress",
        Some("_INBOX.x.1"),
        &headers,
        binary(1000),
    );
    assert_eq!(
        effects(&out),
        vec![Action::Deliver(Delivery {
            subscription: 5,
            subject: "jobs.7.progress".into(),
            reply_to: Some("_INBOX.x.1".into()),
            headers: headers.to_vec(),
            payload: binary(1000),
            held: None,
        })]
    );
    assert_eq!(e.counters().delivered, 1);
}

#[test]
fn spilled_round_trip_reads_the_row_on_a_reader() {
    let mut e = ready("{}");
    e.subscribe(5, "cache.blob", None, 1).unwrap();
    let headers = [Header::new("k", "v")];
    let out = loop_back(&mut e, "cache.blob", None, &headers, binary(65536));
    let read = only_query(&out);
    assert_eq!(
        read.sql,
        "SELECT payload FROM switchyard_carrier_spill WHERE id = $1"
    );
    assert_eq!(read_id(&read), 1);
    assert!(read.connection >= FIRST_READER);
    assert!(deliveries(&out).is_empty());
    let out = e.answered(read.id, Ok(rows(&binary(65536))), 2);
    assert_eq!(
        deliveries(&out),
        vec![Delivery {
            subscription: 5,
            subject: "cache.blob".into(),
            reply_to: None,
            headers: headers.to_vec(),
            payload: binary(65536),
            held: None,
        }]
    );
}

#[test]
fn every_matching_subscription_gets_the_message_and_star_is_one_token() {
    let mut e = ready("{}");
    e.subscribe(1, "jobs.*.progress", None, 1).unwrap();
    e.subscribe(2, "jobs.7.progress", None, 1).unwrap();
    e.subscribe(3, "jobs.*", None, 1).unwrap();
    e.subscribe(4, "cache.*", None, 1).unwrap();
    let out = e.notified(
        LISTENER,
        vec![
            heard("m jobs.7.progress   b25l"),
            heard("m jobs.7.x.progress   dHdv"),
            heard("m jobs.7   dGhyZWU="),
        ],
        0,
        1,
    );
    let got: Vec<(u64, Vec<u8>)> = deliveries(&out)
        .into_iter()
        .map(|d| (d.subscription, d.payload))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, b"one".to_vec()),
            (2, b"one".to_vec()),
            (3, b"three".to_vec())
        ]
    );
}

#[test]
fn unsubscribe_removes_only_its_own_subscription() {
    let mut e = ready("{}");
    e.subscribe(1, "jobs.unsub", None, 1).unwrap();
    e.subscribe(2, "jobs.unsub", None, 1).unwrap();
    assert_eq!(e.unsubscribe(2, 1), vec![]);
    let out = e.notified(LISTENER, vec![heard("m jobs.unsub   eA==")], 0, 1);
    let ids: Vec<u64> = deliveries(&out).iter().map(|d| d.subscription).collect();
    assert_eq!(ids, [1]);
    e.unsubscribe(1, 1);
    assert_eq!(
        e.notified(LISTENER, vec![heard("m jobs.unsub   eA==")], 0, 1),
        vec![]
    );
}

#[test]
fn arrival_order_holds_when_spill_reads_answer_out_of_order() {
    let mut e = ready("{}");
    e.subscribe(9, "jobs.*", None, 1).unwrap();
    let out = e.notified(
        LISTENER,
        vec![
            heard("m jobs.a   YQ=="),
            heard("s 10 jobs.b  "),
            heard("m jobs.c   Yw=="),
            heard("s 11 jobs.d  "),
            heard("s 12 jobs.e  "),
            heard("m jobs.f   Zg=="),
        ],
        0,
        1,
    );
    // What nothing holds up goes at once.
    let first: Vec<String> = deliveries(&out).into_iter().map(|d| d.subject).collect();
    assert_eq!(first, ["jobs.a"]);
    let reads = queries(&out);
    assert_eq!(reads.iter().map(read_id).collect::<Vec<_>>(), [10, 11, 12]);
    // Three reads at once, on three different readers.
    let mut readers: Vec<u64> = reads.iter().map(|q| q.connection).collect();
    readers.dedup();
    assert_eq!(readers.len(), 3);

    assert!(deliveries(&e.answered(reads[2].id, Ok(rows(b"E")), 2)).is_empty());
    assert!(deliveries(&e.answered(reads[1].id, Ok(rows(b"D")), 3)).is_empty());
    let out = e.answered(reads[0].id, Ok(rows(b"B")), 4);
    let rest: Vec<(String, Vec<u8>)> = deliveries(&out)
        .into_iter()
        .map(|d| (d.subject, d.payload))
        .collect();
    assert_eq!(
        rest,
        vec![
            ("jobs.b".into(), b"B".to_vec()),
            ("jobs.c".into(), b"c".to_vec()),
            ("jobs.d".into(), b"D".to_vec()),
            ("jobs.e".into(), b"E".to_vec()),
            ("jobs.f".into(), b"f".to_vec()),
        ]
    );
    assert_eq!(e.counters().delivered, 6);
}

#[test]
fn reads_are_round_robin_and_at_most_one_per_reader() {
    let mut e = ready(r#"{"spill_readers": 2}"#);
    e.subscribe(1, "jobs.*", None, 1).unwrap();
    let markers: Vec<Notification> = (1..=5).map(|i| heard(format!("s {i} jobs.x  "))).collect();
    let out = e.notified(LISTENER, markers, 0, 1);
    let reads = queries(&out);
    assert_eq!(reads.iter().map(read_id).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(
        reads.iter().map(|q| q.connection).collect::<Vec<_>>(),
        [FIRST_READER, FIRST_READER + 1]
    );
    // A reader that answers takes the next read.
    let next = only_query(&e.answered(reads[0].id, Ok(rows(b"1")), 2));
    assert_eq!((read_id(&next), next.connection), (3, FIRST_READER));
    let next = only_query(&e.answered(reads[1].id, Ok(rows(b"2")), 2));
    assert_eq!((read_id(&next), next.connection), (4, FIRST_READER + 1));
}

#[test]
fn subjects_nobody_here_wants_are_neither_read_nor_queued() {
    let mut e = ready("{}");
    e.subscribe(1, "jobs.mine", None, 1).unwrap();
    let out = e.notified(
        LISTENER,
        vec![
            heard("s 1 jobs.other  "),
            heard("m jobs.other   "),
            heard("m jobs.mine   "),
        ],
        0,
        1,
    );
    assert!(queries(&out).is_empty());
    assert_eq!(deliveries(&out).len(), 1);
}

#[test]
fn expired_rows_dropped_notifications_and_foreign_texts_are_counted() {
    let mut e = ready("{}");
    e.subscribe(1, "jobs.*", None, 1).unwrap();
    let out = e.notified(
        LISTENER,
        vec![
            heard("s 1 jobs.gone  "),
            heard("m jobs.after   "),
            heard("hello from psql"),
            Notification {
                channel: "other".into(),
                payload: "m jobs.x   ".into(),
            },
        ],
        3,
        1,
    );
    assert!(
        out.iter()
            .any(|a| matches!(a, Action::Log(LogLevel::Warn, m) if m.contains("dropped 3")))
    );
    let read = only_query(&out);
    // Retention deleted the row before it was read.
    let out = e.answered(read.id, Ok(Vec::new()), 2);
    let subjects: Vec<String> = deliveries(&out).into_iter().map(|d| d.subject).collect();
    assert_eq!(subjects, ["jobs.after"]);
    let c = e.counters();
    assert_eq!((c.lost, c.malformed, c.delivered), (4, 1, 1));
}

#[test]
fn a_failed_read_is_a_loss_and_does_not_hold_the_queue() {
    let mut e = ready("{}");
    e.subscribe(1, "jobs.*", None, 1).unwrap();
    let out = e.notified(
        LISTENER,
        vec![heard("s 1 jobs.a  "), heard("m jobs.b   ")],
        0,
        1,
    );
    let out = e.answered(only_query(&out).id, Err("canceling statement".into()), 2);
    assert_eq!(deliveries(&out).len(), 1);
    assert_eq!(e.counters().lost, 1);
}

#[test]
fn a_read_that_never_answers_times_out() {
    let mut e = ready("{}");
    e.subscribe(1, "jobs.*", None, 1).unwrap();
    let out = e.notified(
        LISTENER,
        vec![heard("s 1 jobs.a  "), heard("m jobs.b   ")],
        0,
        1000,
    );
    let read = only_query(&out);
    // The retention tick (t=10 s) comes first, then the read's deadline.
    assert_eq!(timer(&out), None);
    let out = e.timer(10_000);
    assert_eq!(timer(&out), Some(1000 + SPILL_READ_TIMEOUT_MS - 10_000));
    let out = e.timer(1000 + SPILL_READ_TIMEOUT_MS);
    assert_eq!(deliveries(&out).len(), 1);
    assert_eq!(e.counters().lost, 1);
    // A late answer changes nothing.
    let out = e.answered(read.id, Ok(rows(b"late")), 20_000);
    assert!(deliveries(&out).is_empty());
    assert_eq!(e.counters().lost, 1);
}

#[test]
fn notifications_from_a_stale_listener_are_ignored_but_drops_count() {
    let mut e = ready("{}");
    e.subscribe(1, "jobs.*", None, 1).unwrap();
    let out = e.notified(99, vec![heard("m jobs.a   ")], 2, 1);
    assert!(deliveries(&out).is_empty());
    assert_eq!(e.counters().lost, 2);
}

#[test]
fn sql_of_a_read_names_the_row() {
    let mut e = ready("{}");
    e.subscribe(1, "jobs.*", None, 1).unwrap();
    let out = e.notified(
        LISTENER,
        vec![heard("s 9223372036854775807 jobs.a  ")],
        0,
        1,
    );
    let read = only_query(&out);
    assert_eq!(read.sql, sql::READ_SPILL);
    assert_eq!(read_id(&read), i64::MAX);
}
