//! The claim queue's producer side: queueing units with publish and request,
//! what is refused, and acknowledgements.

use switchyard_plugin_pgbus::{
    Action, CarrierError, DEFAULT_QUEUE_TABLE, Delivery, Header, LogLevel, MAX_PAYLOAD, Param,
    Reply, notification, sql,
};

use crate::support::*;

fn statements() -> sql::TableStatements {
    sql::TableStatements::new(DEFAULT_QUEUE_TABLE)
}

#[test]
fn a_published_unit_is_inserted_and_woken_in_one_statement() {
    let mut e = ready("{}");
    let headers = [
        Header::new("switchyard-unit-id", "u-1"),
        Header::new("a", "b"),
    ];
    let out = e
        .publish("work.render", None, &headers, b"frame".to_vec(), 1)
        .unwrap();
    let q = only_query(&out);
    assert_eq!(q.connection, PUBLISHER);
    assert_eq!(
        q.sql,
        "WITH u AS (INSERT INTO switchyard_carrier_queue (unit_id, subject, headers, payload) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (unit_id) DO NOTHING RETURNING 1) \
         SELECT (SELECT count(*) FROM u)::text, pg_notify($5, $2)::text"
    );
    assert_eq!(
        q.params,
        vec![
            Param::Text("u-1".into()),
            Param::Text("work.render".into()),
            Param::Text(notification::encode_headers(&headers)),
            Param::Bytes(b"frame".to_vec()),
            Param::Text("switchyard_bus_wake".into()),
        ]
    );
    assert_eq!(e.answered(q.id, Ok(vec![text_row(&["1", ""])]), 2), vec![]);
    // The producer retried: the table keeps the first.
    let again = only_query(
        &e.publish("work.render", None, &headers, Vec::new(), 3)
            .unwrap(),
    );
    e.answered(again.id, Ok(vec![text_row(&["0", ""])]), 4);
    let c = e.counters();
    assert_eq!((c.published, c.queued, c.failed_publishes), (2, 1, 0));
}

#[test]
fn the_configured_table_and_wake_channel_are_used() {
    let mut e = ready(r#"{"queue_roots": ["tasks"], "queue_table": "q2", "wake_channel": "w2"}"#);
    let out = e
        .publish("tasks.a", None, &unit("u"), Vec::new(), 1)
        .unwrap();
    let q = only_query(&out);
    assert_eq!(q.sql, sql::TableStatements::new("q2").enqueue);
    assert!(q.sql.contains("INSERT INTO q2 "));
    assert_eq!(q.params[4], Param::Text("w2".into()));
    // `work.` is fan-out here, so it needs no unit id.
    assert_eq!(
        only_query(&e.publish("jobs.a", None, &[], Vec::new(), 1).unwrap()).sql,
        sql::NOTIFY
    );
}

#[test]
fn a_unit_without_a_good_unit_id_is_refused() {
    let mut e = ready("{}");
    assert_eq!(
        e.publish("work.render", None, &[], Vec::new(), 1),
        Err(CarrierError::Refused(
            "a work unit needs the `switchyard-unit-id` header".into()
        ))
    );
    for bad in [String::new(), "x".repeat(129), "a\nb".into()] {
        assert!(
            matches!(
                e.publish("work.render", None, &unit(&bad), Vec::new(), 1),
                Err(CarrierError::Refused(m)) if m.contains("1 to 128 bytes")
            ),
            "{bad:?}"
        );
    }
    assert!(
        e.publish("work.render", None, &unit(&"x".repeat(128)), Vec::new(), 1)
            .is_ok()
    );
    assert!(matches!(
        e.request(1, "work.render", &[], Vec::new(), 1000, 1),
        Err(CarrierError::Refused(_))
    ));
    assert_eq!(e.counters().published, 1);
}

#[test]
fn other_refusals_of_a_unit() {
    let mut e = ready("{}");
    assert!(matches!(
        e.publish("work.*", None, &unit("u"), Vec::new(), 1),
        Err(CarrierError::InvalidSubject(_))
    ));
    assert!(matches!(
        e.publish("work.render", Some("_INBOX.x.1"), &unit("u"), Vec::new(), 1),
        Err(CarrierError::Refused(m)) if m.contains("no reply-to")
    ));
    assert_eq!(
        e.publish(
            "work.render",
            None,
            &unit("u"),
            vec![0; MAX_PAYLOAD as usize + 1],
            1
        ),
        Err(CarrierError::PayloadTooLarge(MAX_PAYLOAD + 1, MAX_PAYLOAD))
    );
    // Far larger than a notification: the table takes it whole.
    let out = e
        .publish(
            "work.render",
            None,
            &unit("u"),
            vec![7; MAX_PAYLOAD as usize],
            1,
        )
        .unwrap();
    assert_eq!(
        only_query(&out).params[3],
        Param::Bytes(vec![7; MAX_PAYLOAD as usize])
    );

    let (mut idle, _) = start("{}");
    assert_eq!(
        idle.publish("work.render", None, &unit("u"), Vec::new(), 0),
        Err(CarrierError::NotConnected)
    );
}

#[test]
fn fan_out_messages_published_before_a_unit_go_first() {
    let mut e = ready("{}");
    e.publish("jobs.a", None, &[], Vec::new(), 1).unwrap();
    e.publish("jobs.b", None, &[], Vec::new(), 1).unwrap();
    let out = e
        .publish("work.x", None, &unit("u"), Vec::new(), 1)
        .unwrap();
    let sent: Vec<String> = queries(&out).into_iter().map(|q| q.sql.into()).collect();
    assert_eq!(sent, [sql::NOTIFY.to_owned(), statements().enqueue]);
}

#[test]
fn a_request_is_answered_once_the_unit_is_in_the_table() {
    let mut e = ready("{}");
    let out = e
        .request(7, "work.render", &unit("u-7"), b"p".to_vec(), 5000, 1)
        .unwrap();
    let q = only_query(&out);
    assert_eq!(q.sql, statements().enqueue);
    assert_eq!(q.params[0], Param::Text("u-7".into()));
    assert_eq!(
        effects(&e.answered(q.id, Ok(vec![text_row(&["1", ""])]), 2)),
        vec![Action::Reply(Reply {
            request: 7,
            outcome: Ok(Delivery {
                subscription: 0,
                subject: "work.render".into(),
                reply_to: None,
                headers: Vec::new(),
                payload: Vec::new(),
                held: None,
            }),
        })]
    );
    // A repeat of the unit is just as safe.
    let q = only_query(
        &e.request(8, "work.render", &unit("u-7"), Vec::new(), 5000, 3)
            .unwrap(),
    );
    assert!(matches!(
        &effects(&e.answered(q.id, Ok(vec![text_row(&["0", ""])]), 4))[..],
        [Action::Reply(Reply {
            request: 8,
            outcome: Ok(_)
        })]
    ));
    assert_eq!(e.counters().queued, 1);
    // Nothing is left to time out.
    assert_eq!(effects(&e.timer(6000)), vec![]);
}

#[test]
fn a_request_whose_insert_fails_is_refused_with_the_reason() {
    let mut e = ready("{}");
    let q = only_query(
        &e.request(1, "work.render", &unit("u"), Vec::new(), 5000, 1)
            .unwrap(),
    );
    let out = e.answered(q.id, Err("relation does not exist".into()), 2);
    assert!(out.iter().any(
        |a| matches!(a, Action::Log(LogLevel::Warn, m) if m.contains("relation does not exist"))
    ));
    assert_eq!(
        effects(&out),
        vec![Action::Reply(Reply {
            request: 1,
            outcome: Err(CarrierError::Refused(
                "queueing the unit failed: relation does not exist".into()
            )),
        })]
    );
    // A plain publish's failure is counted instead.
    let q = only_query(
        &e.publish("work.render", None, &unit("v"), Vec::new(), 3)
            .unwrap(),
    );
    e.answered(q.id, Err("disk full".into()), 4);
    assert_eq!(e.counters().failed_publishes, 1);
}

#[test]
fn a_request_lost_with_the_publisher_is_not_connected() {
    let mut e = ready("{}");
    e.request(1, "work.render", &unit("u"), Vec::new(), 5000, 1)
        .unwrap();
    let out = e.closed(PUBLISHER, "gone", 2);
    assert!(effects(&out).contains(&Action::Reply(Reply {
        request: 1,
        outcome: Err(CarrierError::NotConnected),
    })));
}

#[test]
fn a_request_times_out_and_a_late_answer_is_nobodys() {
    let mut e = ready("{}");
    let out = e
        .request(1, "work.render", &unit("u"), Vec::new(), 1000, 0)
        .unwrap();
    let q = only_query(&out);
    assert_eq!(timer(&out), Some(1000));
    assert_eq!(
        effects(&e.timer(1000)),
        vec![Action::Reply(Reply {
            request: 1,
            outcome: Err(CarrierError::Timeout),
        })]
    );
    assert_eq!(
        effects(&e.answered(q.id, Ok(vec![text_row(&["1", ""])]), 1500)),
        vec![]
    );
    assert!(matches!(
        e.request(2, "_claim.4", &[], Vec::new(), 1000, 2000),
        Err(CarrierError::InvalidSubject(_))
    ));
}

#[test]
fn publishing_to_a_claim_reply_to_deletes_the_unit() {
    let mut e = ready("{}");
    let out = e.publish("_claim.42", None, &[], Vec::new(), 1).unwrap();
    let q = only_query(&out);
    assert_eq!(q.connection, PUBLISHER);
    assert_eq!(q.sql, "DELETE FROM switchyard_carrier_queue WHERE id = $1");
    assert_eq!(q.params, vec![Param::Int(42)]);
    assert_eq!(e.answered(q.id, Ok(Vec::new()), 2), vec![]);
    assert_eq!(e.counters().acknowledged, 1);
    // Not fan-out: no publish counted, whatever the roots.
    assert_eq!(e.counters().published, 0);

    let q = only_query(&e.publish("_claim.43", None, &[], Vec::new(), 3).unwrap());
    let out = e.answered(q.id, Err("timeout".into()), 4);
    assert!(matches!(&out[..], [Action::Log(LogLevel::Warn, m)] if m.contains("row 43")));
    assert_eq!(e.counters().acknowledged, 1);

    for bad in ["_claim.x", "_claim.0", "_claim.-1", "_claim.1.2"] {
        assert!(
            matches!(
                e.publish(bad, None, &[], Vec::new(), 5),
                Err(CarrierError::InvalidSubject(_))
            ),
            "{bad}"
        );
    }
    let (mut idle, _) = start(r#"{"roots": []}"#);
    assert_eq!(
        idle.publish("_claim.1", None, &[], Vec::new(), 0),
        Err(CarrierError::NotConnected)
    );
}
