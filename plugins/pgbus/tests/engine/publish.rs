//! Publishing: what the publisher is asked to run, the spill decision,
//! batching, and refusals.

use switchyard_plugin_pgbus::{
    Action, CarrierError, Header, MAX_BATCH_NOTIFICATIONS, MAX_PAYLOAD, MAX_SPILL_BATCH, Param,
    notification, sql,
};

use crate::support::*;

#[test]
fn a_small_message_is_one_notify_on_the_publisher() {
    let mut e = ready("{}");
    let out = e
        .publish("jobs.1.progress", None, &[], b"50%".to_vec(), 1)
        .unwrap();
    let q = only_query(&out);
    assert_eq!(q.connection, PUBLISHER);
    assert_eq!(q.sql, "SELECT pg_notify($1, $2)::text");
    assert_eq!(
        q.params,
        vec![
            Param::Text("switchyard_bus".into()),
            Param::Text("m jobs.1.progress   NTAl".into())
        ]
    );
    assert_eq!(e.counters().published, 1);
}

#[test]
fn spill_decision_at_7999_and_8000_notification_bytes() {
    // 11 bytes around a 6-byte subject plus 7988 of base64 (5991 bytes): 7999.
    let mut e = ready("{}");
    let out = e.publish("jobs.x", None, &[], binary(5991), 1).unwrap();
    let q = only_query(&out);
    assert_eq!(q.sql, sql::NOTIFY);
    assert_eq!(text(&q, 1).len(), 7999);

    // One more subject byte: 8000, spilled.
    let mut e = ready("{}");
    let out = e.publish("jobs.xy", None, &[], binary(5991), 1).unwrap();
    let q = only_query(&out);
    assert_eq!(q.sql, sql::SPILL);
    assert_eq!(q.connection, PUBLISHER);
    assert_eq!(
        q.params,
        vec![
            Param::Text("jobs.xy".into()),
            Param::Bytes(binary(5991)),
            Param::Text("switchyard_bus".into()),
            Param::Text("jobs.xy  ".into()),
        ]
    );
    assert_eq!(e.counters().spilled, 1);
}

#[test]
fn a_64_kib_payload_is_spilled_with_its_reply_to_and_headers_in_the_marker() {
    let mut e = ready("{}");
    let headers = [Header::new("trace", "t-1")];
    let out = e
        .publish(
            "cache.blob",
            Some("_INBOX.peer.4"),
            &headers,
            binary(65536),
            1,
        )
        .unwrap();
    let q = only_query(&out);
    assert_eq!(q.sql, sql::SPILL);
    assert_eq!(q.params[1], Param::Bytes(binary(65536)));
    let marker = notification::marker(77, text(&q, 3));
    let notification::Notice::Spilled { id, message } = notification::decode(&marker).unwrap()
    else {
        panic!("{marker}");
    };
    assert_eq!(id, 77);
    assert_eq!(message.subject, "cache.blob");
    assert_eq!(message.reply_to.as_deref(), Some("_INBOX.peer.4"));
    assert_eq!(message.headers, headers);
}

#[test]
fn a_lower_threshold_spills_sooner() {
    let mut e = ready(r#"{"spill_threshold": 100}"#);
    let notify = only_query(&e.publish("jobs.x", None, &[], binary(66), 1).unwrap());
    assert_eq!(notify.sql, sql::NOTIFY, "99 bytes");
    e.answered(notify.id, Ok(rows(b"")), 1);
    let out = e.publish("jobs.x", None, &[], binary(67), 1).unwrap();
    assert_eq!(only_query(&out).sql, sql::SPILL, "103 bytes");
}

#[test]
fn payload_limits() {
    let mut e = ready("{}");
    assert_eq!(e.max_payload(), 1_048_576);
    assert_eq!(
        e.publish("jobs.x", None, &[], vec![0; MAX_PAYLOAD as usize + 1], 1),
        Err(CarrierError::PayloadTooLarge(MAX_PAYLOAD + 1, MAX_PAYLOAD))
    );
    let out = e
        .publish("jobs.x", None, &[], vec![0; MAX_PAYLOAD as usize], 1)
        .unwrap();
    assert_eq!(only_query(&out).sql, sql::SPILL);
}

#[test]
fn headers_too_large_for_any_notification_are_refused() {
    let mut e = ready("{}");
    let headers = [Header::new("big", "x".repeat(6000))];
    assert!(matches!(
        e.publish("jobs.x", None, &headers, Vec::new(), 1),
        Err(CarrierError::Refused(m)) if m.contains("fewer than 8000")
    ));
    assert_eq!(e.counters().published, 0);
}

#[test]
fn nothing_is_published_before_ready() {
    let (mut e, _) = start("{}");
    assert_eq!(
        e.publish("jobs.x", None, &[], Vec::new(), 0),
        Err(CarrierError::NotConnected)
    );
    // Subject rules come first.
    assert!(matches!(
        e.publish("jobs.*", None, &[], Vec::new(), 0),
        Err(CarrierError::InvalidSubject(_))
    ));
}

#[test]
fn subject_rules_on_publish_and_subscribe() {
    let mut e = ready("{}");
    for bad in [
        "jobs.*",
        "jobs.>",
        ">",
        "jobs..x",
        "jobs.a b",
        "",
        "elsewhere.x",
        "jobs",
    ] {
        assert!(
            matches!(
                e.publish(bad, None, &[], Vec::new(), 1),
                Err(CarrierError::InvalidSubject(_))
            ),
            "publish {bad:?}"
        );
    }
    assert!(matches!(
        e.publish("jobs.x", Some("elsewhere.reply"), &[], Vec::new(), 1),
        Err(CarrierError::InvalidSubject(_))
    ));
    // Replies go to inboxes, whatever the roots.
    assert!(e.publish("_INBOX.abc.1", None, &[], Vec::new(), 1).is_ok());
    assert!(
        e.publish("jobs.x", Some("_INBOX.abc.2"), &[], Vec::new(), 1)
            .is_ok()
    );

    for bad in [
        "jobs.>",
        "jobs.a*",
        "jobs.*x",
        "jobs..progress",
        "jobs.a b",
        "*.x",
        "elsewhere.*",
    ] {
        assert!(
            matches!(
                e.subscribe(1, bad, None, 1),
                Err(CarrierError::InvalidSubject(_))
            ),
            "subscribe {bad:?}"
        );
    }
    assert!(e.subscribe(1, "jobs.*.progress", None, 1).is_ok());
    assert!(matches!(
        e.subscribe(1, "jobs.x", None, 1),
        Err(CarrierError::Refused(_))
    ));

    let mut any = ready(r#"{"roots": []}"#);
    assert!(any.publish("elsewhere.x", None, &[], Vec::new(), 1).is_ok());
    assert!(any.subscribe(1, "*.x", None, 1).is_ok());
}

#[test]
fn queue_groups_are_refused() {
    let mut e = ready("{}");
    assert_eq!(
        e.subscribe(1, "jobs.units", Some("workers"), 1),
        Err(CarrierError::Refused(
            "queue groups are served by the claim queue, not by pgbus fan-out".into()
        ))
    );
    // The id stays free.
    assert!(e.subscribe(1, "jobs.units", None, 1).is_ok());
}

#[test]
fn messages_published_while_a_query_runs_go_out_in_one_batch() {
    let mut e = ready("{}");
    let first = only_query(&e.publish("jobs.a", None, &[], b"1".to_vec(), 1).unwrap());
    assert_eq!(
        e.publish("jobs.b", None, &[], b"2".to_vec(), 1).unwrap(),
        vec![]
    );
    assert_eq!(
        e.publish("jobs.c", None, &[], b"3".to_vec(), 1).unwrap(),
        vec![]
    );
    let batch = only_query(&e.answered(first.id, Ok(rows(b"")), 2));
    assert_eq!(batch.sql, sql::NOTIFY_BATCH);
    assert_eq!(batch.connection, PUBLISHER);
    assert_eq!(text(&batch, 1), "m jobs.b   Mg==\nm jobs.c   Mw==");

    // PostgreSQL folds identical notifications of one transaction: a repeat
    // starts a new batch.
    assert_eq!(
        e.publish("jobs.d", None, &[], b"4".to_vec(), 2).unwrap(),
        vec![]
    );
    let out = e.publish("jobs.d", None, &[], b"4".to_vec(), 2).unwrap();
    let single = only_query(&out);
    assert_eq!(
        (&*single.sql, text(&single, 1)),
        (sql::NOTIFY, "m jobs.d   NA==")
    );
    assert_eq!(e.answered(batch.id, Ok(rows(b"2")), 3), vec![]);
    let rest = only_query(&e.answered(single.id, Ok(rows(b"")), 3));
    assert_eq!(
        (&*rest.sql, text(&rest, 1)),
        (sql::NOTIFY, "m jobs.d   NA==")
    );
    assert_eq!(e.counters().published, 5);
}

#[test]
fn a_full_batch_goes_out_at_once() {
    let mut e = ready("{}");
    e.publish("jobs.a", None, &[], Vec::new(), 1).unwrap();
    let mut sent = Vec::new();
    for i in 0..MAX_BATCH_NOTIFICATIONS {
        sent.extend(queries(
            &e.publish(&format!("jobs.{i}"), None, &[], Vec::new(), 1)
                .unwrap(),
        ));
    }
    assert_eq!(sent.len(), 1);
    assert_eq!(
        text(&sent[0], 1).split('\n').count() as u64,
        MAX_BATCH_NOTIFICATIONS
    );
}

#[test]
fn a_spill_goes_after_the_batched_messages_before_it() {
    let mut e = ready("{}");
    let first = only_query(&e.publish("jobs.a", None, &[], Vec::new(), 1).unwrap());
    e.publish("jobs.b", None, &[], Vec::new(), 1).unwrap();
    // The spill waits behind the query in flight; the inline batch before
    // it goes out first.
    let out = e.publish("jobs.c", None, &[], binary(65536), 1).unwrap();
    let sent: Vec<String> = queries(&out).into_iter().map(|q| q.sql.into()).collect();
    assert_eq!(sent, [sql::NOTIFY]);
    let out = e.answered(first.id, Ok(rows(b"")), 2);
    assert!(queries(&out).is_empty(), "one query still in flight");
}

#[test]
fn spills_published_while_a_query_runs_go_out_in_one_statement() {
    let mut e = ready("{}");
    let first = only_query(&e.publish("jobs.a", None, &[], binary(9000), 1).unwrap());
    assert_eq!(first.sql, sql::SPILL);
    let headers = [Header::new("trace", "t-1")];
    for (subject, size) in [("jobs.b", 9000), ("jobs.c", 7000), ("jobs.d", 65536)] {
        let (reply_to, headers) = match subject {
            "jobs.c" => (Some("jobs.r"), &headers[..]),
            _ => (None, &[][..]),
        };
        let out = e
            .publish(subject, reply_to, headers, binary(size), 1)
            .unwrap();
        assert!(queries(&out).is_empty(), "{subject} waits");
    }
    assert_eq!(e.counters().spilled, 4);
    let batch = only_query(&e.answered(first.id, Ok(rows(b"")), 2));
    assert_eq!(batch.sql, sql::spill_batch(3));
    assert_eq!(batch.connection, PUBLISHER);
    let header = notification::encode_headers(&headers);
    assert_eq!(
        batch.params,
        vec![
            Param::Text("switchyard_bus".into()),
            Param::Text(format!("jobs.b  \njobs.c jobs.r {header}\njobs.d  ")),
            Param::Bytes(binary(9000)),
            Param::Bytes(binary(7000)),
            Param::Bytes(binary(65536)),
        ]
    );
    // Nothing waits once it is answered.
    assert!(queries(&e.answered(batch.id, Ok(rows(b"3")), 3)).is_empty());
}

#[test]
fn a_full_spill_batch_goes_out_at_once_and_inline_messages_wait_behind_it() {
    let mut e = ready("{}");
    let first = only_query(&e.publish("jobs.a", None, &[], binary(65536), 1).unwrap());
    let mut sent = Vec::new();
    for _ in 0..MAX_SPILL_BATCH {
        sent.extend(queries(
            &e.publish("jobs.b", None, &[], binary(65536), 1).unwrap(),
        ));
    }
    assert_eq!(sent.len(), 1, "the sixteenth spill sends the batch");
    assert_eq!(sent[0].sql, sql::spill_batch(MAX_SPILL_BATCH));
    assert_eq!(sent[0].params.len() as u64, 2 + MAX_SPILL_BATCH);
    // Inline, spill, inline: each kind goes out before the next starts
    // waiting, so the publisher runs them in publish order.
    assert!(queries(&e.publish("jobs.c", None, &[], b"1".to_vec(), 1).unwrap()).is_empty());
    let out = e.publish("jobs.d", None, &[], binary(65536), 1).unwrap();
    assert_eq!(only_query(&out).sql, sql::NOTIFY, "jobs.c before jobs.d");
    let out = e.publish("jobs.e", None, &[], b"2".to_vec(), 1).unwrap();
    let spill = only_query(&out);
    assert_eq!(
        (&*spill.sql, text(&spill, 1)),
        (&*sql::spill_batch(1), "jobs.d  ")
    );
    e.answered(first.id, Ok(rows(b"")), 2);
    e.answered(sent[0].id, Ok(rows(b"")), 2);
    let out = e.answered(spill.id - 1, Ok(rows(b"")), 2);
    assert!(queries(&out).is_empty(), "the spill is still in flight");
    let last = only_query(&e.answered(spill.id, Ok(rows(b"1")), 2));
    assert_eq!(
        (&*last.sql, text(&last, 1)),
        (sql::NOTIFY, "m jobs.e   Mg==")
    );
}

#[test]
fn a_failed_spill_batch_counts_every_message() {
    let mut e = ready("{}");
    let first = only_query(&e.publish("jobs.a", None, &[], binary(65536), 1).unwrap());
    for _ in 0..3 {
        e.publish("jobs.b", None, &[], binary(65536), 1).unwrap();
    }
    let batch = only_query(&e.answered(first.id, Ok(rows(b"")), 2));
    let out = e.answered(batch.id, Err("disk full".into()), 3);
    assert!(matches!(&out[..], [Action::Log(_, m)] if m.contains("3 message(s) failed")));
    assert_eq!(e.counters().failed_publishes, 3);
}

#[test]
fn a_failed_publish_is_logged_and_counted() {
    let mut e = ready("{}");
    let q = only_query(&e.publish("jobs.a", None, &[], Vec::new(), 1).unwrap());
    let out = e.answered(q.id, Err("out of shared memory".into()), 2);
    assert!(matches!(&out[..], [Action::Log(_, m)] if m.contains("out of shared memory")));
    assert_eq!(e.counters().failed_publishes, 1);
}
