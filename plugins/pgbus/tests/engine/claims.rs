//! The claim queue's consumer side: subscribing with a queue group, wakes,
//! claims and their deliveries, the claim tick, reconnects.

use switchyard_plugin_pgbus::{
    Action, CLAIM_BATCH, CLAIM_INTERVAL_MS, CarrierError, Cell, DEFAULT_QUEUE_TABLE, Delivery,
    Engine, Header, Held, MAX_UNACKED, Notification, Param, Query, Row, notification, sql,
};

use crate::support::*;

fn claim_sql() -> String {
    sql::TableStatements::new(DEFAULT_QUEUE_TABLE).claim
}

/// A wake for `subject` as the listener hears it.
fn wake(subject: &str) -> Notification {
    Notification {
        channel: "switchyard_bus_wake".into(),
        payload: subject.into(),
    }
}

/// The claims among the actions.
fn claims(out: &[Action]) -> Vec<Query> {
    let sql = claim_sql();
    queries(out).into_iter().filter(|q| q.sql == sql).collect()
}

/// A claimed row as the claim statement answers it.
fn claimed(id: i64, unit_id: &str, headers: &[Header], payload: &[u8]) -> Row {
    vec![
        Some(id.to_string().into_bytes()),
        Some(unit_id.as_bytes().to_vec()),
        Some(notification::encode_headers(headers).into_bytes()),
        Some(payload.to_vec()),
    ]
}

/// `count` rows of units of one byte, from row `first`.
fn batch(first: i64, count: u64) -> Vec<Row> {
    (first..first + count as i64)
        .map(|id| claimed(id, &format!("u-{id}"), &unit(&format!("u-{id}")), b"x"))
        .collect()
}

/// A ready engine with subscription 1 consuming `work.render` at t=0, and
/// its first claim.
fn consuming() -> (Engine, Query) {
    let mut e = ready("{}");
    let out = e.subscribe(1, "work.render", Some("render"), 0).unwrap();
    let claim = only_query(&out);
    (e, claim)
}

#[test]
fn a_consumer_listens_for_wakes_and_claims() {
    let mut e = ready("{}");
    let out = e.subscribe(1, "work.render", Some("render"), 5).unwrap();
    assert_eq!(
        out[0],
        Action::Listen(LISTENER, "switchyard_bus_wake".into())
    );
    let claim = only_query(&out);
    assert_eq!(claim.connection, PUBLISHER);
    assert_eq!(
        claim.sql,
        "UPDATE switchyard_carrier_queue \
         SET claimed_until = now() + make_interval(secs => $3::bigint), attempts = attempts + 1 \
         WHERE id IN (SELECT id FROM switchyard_carrier_queue \
         WHERE subject = $1 AND (claimed_until IS NULL OR claimed_until < now()) \
         ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) \
         RETURNING id::text, unit_id, headers, payload"
    );
    assert_eq!(
        claim.params,
        vec![
            Param::Text("work.render".into()),
            Param::Int(64),
            Param::Int(30)
        ]
    );
    // The claim tick comes before the retention tick.
    assert_eq!(timer(&out), Some(CLAIM_INTERVAL_MS));

    // The wake channel is listened on once; another subject claims too.
    let out = e.subscribe(2, "work.encode", Some("encode"), 6).unwrap();
    assert_eq!(effects(&out).len(), 1, "{out:?}");
    assert_eq!(
        only_query(&out).params[0],
        Param::Text("work.encode".into())
    );
    // Another subscription on a subject being claimed waits for that claim.
    assert_eq!(
        effects(&e.subscribe(3, "work.render", Some("render"), 7).unwrap()),
        vec![]
    );
}

#[test]
fn claimed_rows_become_deliveries_that_reply_to_their_claim() {
    let (mut e, claim) = consuming();
    let headers = [
        Header::new("switchyard-unit-id", "u-9"),
        Header::new("trace", "t"),
    ];
    let rows = vec![
        claimed(12, "u-12", &[], b"second"),
        claimed(9, "u-9", &headers, &binary(1000)),
    ];
    let out = e.answered(claim.id, Ok(rows), 10);
    assert_eq!(
        deliveries(&out),
        vec![
            Delivery {
                subscription: 1,
                subject: "work.render".into(),
                reply_to: Some("_claim.9".into()),
                headers: headers.to_vec(),
                payload: binary(1000),
                held: None,
            },
            Delivery {
                subscription: 1,
                subject: "work.render".into(),
                reply_to: Some("_claim.12".into()),
                // The unit id comes with every unit.
                headers: unit("u-12"),
                payload: b"second".to_vec(),
                held: None,
            },
        ]
    );
    assert!(
        queries(&out).is_empty(),
        "a short batch: nothing more waits"
    );
    let c = e.counters();
    assert_eq!((c.claimed, c.delivered), (2, 2));

    // The host acknowledges through the reply-to.
    let ack = only_query(&e.publish("_claim.9", None, &[], Vec::new(), 11).unwrap());
    assert_eq!(ack.params, vec![Param::Int(9)]);
}

#[test]
fn a_claim_holds_the_payload_column_and_a_delivery_names_the_held_cell() {
    let (mut e, claim) = consuming();
    assert_eq!(
        claim.hold_column,
        Some(3),
        "the payload column stays in the host"
    );
    let mut row: Vec<Option<Cell>> = claimed(9, "u-9", &unit("u-9"), b"")
        .into_iter()
        .map(|c| c.map(Cell::Bytes))
        .collect();
    row[3] = Some(Cell::Held(Held {
        id: 40,
        len: 65_536,
    }));
    let out = e.answered_cells(claim.id, Ok(vec![row]), 10);
    let delivered = deliveries(&out);
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].held, Some(40));
    assert!(delivered[0].payload.is_empty());
    assert_eq!(delivered[0].reply_to.as_deref(), Some("_claim.9"));
}

#[test]
fn units_go_round_robin_over_the_subjects_subscriptions() {
    let (mut e, claim) = consuming();
    e.subscribe(2, "work.render", Some("render"), 0).unwrap();
    let out = e.answered(claim.id, Ok(batch(1, 3)), 1);
    let ids: Vec<u64> = deliveries(&out).iter().map(|d| d.subscription).collect();
    assert_eq!(ids, [1, 2, 1]);
}

#[test]
fn a_full_batch_claims_again() {
    let (mut e, claim) = consuming();
    let out = e.answered(claim.id, Ok(batch(1, CLAIM_BATCH)), 1);
    assert_eq!(deliveries(&out).len(), CLAIM_BATCH as usize);
    let again = only_query(&out);
    assert_eq!(again.sql, claim_sql());
    let out = e.answered(again.id, Ok(batch(100, 3)), 2);
    assert_eq!(deliveries(&out).len(), 3);
    assert!(queries(&out).is_empty());
}

#[test]
fn a_wake_claims_its_subject_only() {
    let (mut e, claim) = consuming();
    e.answered(claim.id, Ok(Vec::new()), 1);
    let out = e.notified(LISTENER, vec![wake("work.encode")], 0, 2);
    assert_eq!(effects(&out), vec![]);
    let out = e.notified(
        LISTENER,
        vec![wake("work.render"), wake("work.render")],
        0,
        3,
    );
    let claim = only_query(&out);
    assert_eq!(claim.params[0], Param::Text("work.render".into()));
    // Wakes during a claim lead to one more claim after it.
    assert_eq!(
        effects(&e.notified(LISTENER, vec![wake("work.render")], 0, 4)),
        vec![]
    );
    let out = e.answered(claim.id, Ok(batch(1, 1)), 5);
    assert_eq!(only_query(&out).sql, claim_sql());
    // A wake is not a fan-out message, nor is it malformed.
    assert_eq!(e.counters().malformed, 0);
}

#[test]
fn dropped_notifications_may_have_been_wakes() {
    let (mut e, claim) = consuming();
    e.answered(claim.id, Ok(Vec::new()), 1);
    let out = e.notified(LISTENER, Vec::new(), 5, 2);
    assert_eq!(only_query(&out).sql, claim_sql());
}

#[test]
fn the_tick_claims_while_a_consumer_exists() {
    let (mut e, claim) = consuming();
    e.answered(claim.id, Ok(Vec::new()), 1);
    assert_eq!(effects(&e.timer(CLAIM_INTERVAL_MS - 1)), vec![]);
    let out = e.timer(CLAIM_INTERVAL_MS);
    let tick = only_query(&out);
    assert_eq!(tick.sql, claim_sql());
    assert_eq!(timer(&out), Some(CLAIM_INTERVAL_MS));
    e.answered(tick.id, Ok(Vec::new()), CLAIM_INTERVAL_MS + 1);
    // One claim at a time: a tick that finds one running claims after it.
    let tick = only_query(&e.timer(2 * CLAIM_INTERVAL_MS));
    assert!(queries(&e.timer(3 * CLAIM_INTERVAL_MS)).is_empty());
    let out = e.answered(tick.id, Ok(Vec::new()), 3 * CLAIM_INTERVAL_MS + 1);
    assert_eq!(only_query(&out).sql, claim_sql());
}

#[test]
fn unsubscribing_the_last_consumer_stops_claims() {
    let (mut e, claim) = consuming();
    e.subscribe(2, "work.render", Some("render"), 0).unwrap();
    e.unsubscribe(1, 0);
    // Subscription 2 wanted a claim while the first ran.
    let again = only_query(&e.answered(claim.id, Ok(Vec::new()), 1));
    e.answered(again.id, Ok(Vec::new()), 2);
    let tick = only_query(&e.timer(CLAIM_INTERVAL_MS));
    e.unsubscribe(2, 1500);
    // Units claimed after the last consumer left are nobody's: they come back.
    let out = e.answered(tick.id, Ok(batch(1, 2)), 1600);
    assert!(deliveries(&out).is_empty());
    assert!(queries(&out).is_empty());
    assert!(matches!(&out[..], [Action::Log(_, m)] if m.contains("2 unit(s) of work.render")));
    let out = e.timer(2 * CLAIM_INTERVAL_MS);
    assert!(queries(&out).is_empty());
    assert_eq!(
        timer(&out),
        Some(10_000 - 2 * CLAIM_INTERVAL_MS),
        "only retention"
    );
    assert!(queries(&e.notified(LISTENER, vec![wake("work.render")], 0, 3000)).is_empty());
}

/// Answers claims with whole batches at `now` until none follows: the
/// consumer holds [`MAX_UNACKED`] units.
fn fill(e: &mut Engine, mut claim: Query, now: u64) {
    let batches = MAX_UNACKED as u64 / CLAIM_BATCH;
    for b in 0..batches {
        let first = (b * CLAIM_BATCH) as i64 + 1;
        let out = e.answered(claim.id, Ok(batch(first, CLAIM_BATCH)), now);
        match queries(&out).pop() {
            Some(next) => claim = next,
            None => assert_eq!(b, batches - 1, "claims stop only at the limit"),
        }
    }
}

#[test]
fn claims_stop_at_the_unacknowledged_limit_and_acks_resume_them() {
    let (mut e, claim) = consuming();
    fill(&mut e, claim, 1);
    assert!(queries(&e.timer(CLAIM_INTERVAL_MS)).is_empty(), "no room");
    // A whole batch must fit: the claim follows the delete that makes room.
    for row in 1..CLAIM_BATCH as i64 {
        let out = e
            .publish(&format!("_claim.{row}"), None, &[], Vec::new(), 1100)
            .unwrap();
        assert_eq!(queries(&out).len(), 1, "the delete only");
    }
    let last = format!("_claim.{CLAIM_BATCH}");
    let out = e.publish(&last, None, &[], Vec::new(), 1100).unwrap();
    let sent: Vec<String> = queries(&out).into_iter().map(|q| q.sql.into()).collect();
    assert_eq!(sent[1], claim_sql());
}

#[test]
fn units_never_acknowledged_stop_counting_when_their_lease_ends() {
    let (mut e, claim) = consuming();
    fill(&mut e, claim, 0);
    // The default lease is 30 s; the tick runs every second.
    assert!(claims(&e.timer(29_000)).is_empty());
    assert_eq!(claims(&e.timer(30_000)).len(), 1);
}

#[test]
fn a_failed_claim_is_logged_and_the_tick_tries_again() {
    let (mut e, claim) = consuming();
    let out = e.answered(claim.id, Err("canceling statement".into()), 1);
    assert!(matches!(&out[..], [Action::Log(_, m)] if m.contains("canceling statement")));
    assert_eq!(only_query(&e.timer(CLAIM_INTERVAL_MS)).sql, claim_sql());
}

#[test]
fn after_a_reconnect_the_wake_channel_is_listened_on_again_and_claimed() {
    let (mut e, claim) = consuming();
    e.answered(claim.id, Ok(Vec::new()), 1);
    e.closed(LISTENER, "terminating connection", 10);
    let out = e.opened(11, 11);
    assert_eq!(out[0], Action::Listen(11, "switchyard_bus".into()));
    let check = only_query(&out);
    let out = e.answered(check.id, Ok(rows(b"1")), 12);
    assert_eq!(
        effects(&out)[..2],
        [
            Action::Ready,
            Action::Listen(11, "switchyard_bus_wake".into())
        ]
    );
    let claim = only_query(&out);
    assert_eq!(claim.sql, claim_sql());
    // Wakes come from the new listener only.
    e.answered(claim.id, Ok(Vec::new()), 13);
    assert!(queries(&e.notified(LISTENER, vec![wake("work.render")], 0, 14)).is_empty());
    assert_eq!(
        queries(&e.notified(11, vec![wake("work.render")], 0, 15)).len(),
        1
    );
}

#[test]
fn a_claim_lost_with_the_publisher_is_sent_again_once_ready() {
    let (mut e, _claim) = consuming();
    e.closed(PUBLISHER, "gone", 10);
    let create = only_query(&e.opened(11, 11));
    assert_eq!(create.sql, create_tables());
    let out = e.answered(create.id, Ok(Vec::new()), 12);
    // The listener kept its LISTEN: no second one.
    assert!(!out.iter().any(|a| matches!(a, Action::Listen(..))));
    let claim = only_query(&out);
    assert_eq!((claim.connection, claim.sql), (11, claim_sql().into()));
}

#[test]
fn a_consumer_subscribed_before_ready_claims_once_ready() {
    let (mut e, out) = start("{}");
    assert!(out.iter().all(|a| !matches!(a, Action::Query(_))));
    assert_eq!(
        effects(&e.subscribe(1, "work.render", Some("render"), 0).unwrap()),
        vec![]
    );
    let create = only_query(&e.opened(PUBLISHER, 1));
    let check = only_query(&e.opened(LISTENER, 1));
    e.answered(check.id, Ok(rows(b"1")), 2);
    let out = e.answered(create.id, Ok(Vec::new()), 2);
    assert_eq!(
        effects(&out)[..2],
        [
            Action::Ready,
            Action::Listen(LISTENER, "switchyard_bus_wake".into())
        ]
    );
    assert_eq!(only_query(&out).sql, claim_sql());
}

#[test]
fn subscriptions_that_are_refused() {
    let mut e = ready("{}");
    // A queued subject takes only consumers, of a literal subject.
    assert!(matches!(
        e.subscribe(1, "work.render", None, 1),
        Err(CarrierError::InvalidSubject(m)) if m.contains("queue group")
    ));
    assert!(matches!(
        e.subscribe(1, "work.*", Some("render"), 1),
        Err(CarrierError::InvalidSubject(_))
    ));
    assert!(matches!(
        e.subscribe(1, "_claim.1", Some("render"), 1),
        Err(CarrierError::InvalidSubject(_))
    ));
    // A queue group elsewhere stays refused.
    assert!(matches!(
        e.subscribe(1, "jobs.units", Some("workers"), 1),
        Err(CarrierError::Refused(_))
    ));
    // Ids are shared between fan-out and consumers.
    e.subscribe(1, "jobs.x", None, 1).unwrap();
    assert!(matches!(
        e.subscribe(1, "work.render", Some("render"), 1),
        Err(CarrierError::Refused(m)) if m.contains("already exists")
    ));
    e.subscribe(2, "work.render", Some("render"), 1).unwrap();
    assert!(matches!(
        e.subscribe(2, "jobs.y", None, 1),
        Err(CarrierError::Refused(m)) if m.contains("already exists")
    ));
    // Wildcard fan-out patterns never see units.
    let mut any = ready(r#"{"roots": []}"#);
    any.subscribe(1, "*.render", None, 1).unwrap();
    let q = only_query(
        &any.publish("work.render", None, &unit("u"), Vec::new(), 1)
            .unwrap(),
    );
    assert_eq!(
        q.sql,
        sql::TableStatements::new(DEFAULT_QUEUE_TABLE).enqueue
    );
}
