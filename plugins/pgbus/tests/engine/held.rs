//! Payloads the host holds (carrier world 0.3.0): held payloads spill by id
//! and are kept while they wait; spill reads hold their payload cell and the
//! delivery names it, kept while earlier arrivals wait; kept payloads are
//! released when they will never be used.

use switchyard_plugin_pgbus::notification::Envelope;
use switchyard_plugin_pgbus::{Action, Cell, Config, Engine, Held, Param, Payload, Query, sql};

use crate::support::*;

fn held(id: u64, len: u64) -> Payload {
    Payload::Held(Held { id, len })
}

fn publish_held(e: &mut Engine, subject: &str, id: u64) -> Vec<Action> {
    e.publish_payload(subject, None, &[], held(id, 65_536), 1)
        .unwrap()
}

/// A spill of `subject` published alone and answered; its query.
fn spilled(e: &mut Engine, subject: &str, id: u64) -> Query {
    let q = only_query(&publish_held(e, subject, id));
    assert_eq!(q.sql, sql::SPILL);
    e.answered(q.id, Ok(rows(b"")), 1);
    q
}

fn held_cell(id: u64) -> Result<Vec<switchyard_plugin_pgbus::CellRow>, String> {
    Ok(vec![vec![Some(Cell::Held(Held { id, len: 65_536 }))]])
}

fn keeps(out: &[Action]) -> Vec<&Action> {
    out.iter()
        .filter(|a| matches!(a, Action::Keep(_) | Action::Release(_)))
        .collect()
}

#[test]
fn hold_from_is_the_shortest_payload_that_spills_whatever_its_envelope() {
    let (e, _) = Engine::new(Config::default(), 1, 0);
    assert_eq!(
        e.hold_from(),
        5_995,
        "with the default threshold (docs/carriers.md)"
    );
    let shortest = Envelope::new("x", None, &[]);
    for threshold in [1, 5, 6, 7, 8, 9, 10, 11, 100, 4000, 7999, 8000] {
        let config = Config::parse(&format!(r#"{{"spill_threshold": {threshold}}}"#)).unwrap();
        let (e, _) = Engine::new(config, 1, 0);
        let from = e.hold_from() as usize;
        assert!(
            shortest.inline_len(from) >= threshold,
            "{threshold}: {from} spills"
        );
        if from > 0 {
            assert!(
                shortest.inline_len(from - 1) < threshold,
                "{threshold}: {from} is the first"
            );
        }
    }
}

#[test]
fn a_held_payload_spills_by_id_even_where_it_would_fit_a_notification() {
    let mut e = ready("{}");
    let q = only_query(
        &e.publish_payload("jobs.a", None, &[], held(10, 100), 1)
            .unwrap(),
    );
    assert_eq!(q.sql, sql::SPILL);
    assert_eq!(q.params[1], Param::Payload(10));
    assert_eq!(e.counters().spilled, 1);
    let too_large = e.publish_payload("jobs.a", None, &[], held(11, 2 << 20), 1);
    assert!(
        too_large.is_err(),
        "the maximum holds for held payloads too"
    );
}

#[test]
fn held_spills_waiting_for_the_publisher_are_kept_then_bound_by_id() {
    let mut e = ready("{}");
    let first = only_query(&publish_held(&mut e, "jobs.a", 10));
    assert_eq!(first.params[1], Param::Payload(10));
    let out = publish_held(&mut e, "jobs.b", 11);
    assert!(queries(&out).is_empty(), "waits behind the first");
    assert_eq!(keeps(&out), [&Action::Keep(11)]);
    let out = e
        .publish_payload("jobs.c", None, &[], Payload::Bytes(binary(9000)), 1)
        .unwrap();
    assert!(keeps(&out).is_empty(), "bytes are not kept");
    let out = publish_held(&mut e, "jobs.d", 12);
    assert_eq!(keeps(&out), [&Action::Keep(12)]);

    let batch = only_query(&e.answered(first.id, Ok(rows(b"")), 2));
    assert_eq!(
        batch.params[2..],
        [
            Param::Payload(11),
            Param::Bytes(binary(9000)),
            Param::Payload(12)
        ]
    );
}

#[test]
fn held_spills_waiting_when_the_publisher_closes_are_released() {
    let mut e = ready("{}");
    only_query(&publish_held(&mut e, "jobs.a", 10));
    publish_held(&mut e, "jobs.b", 11);
    e.publish_payload("jobs.c", None, &[], Payload::Bytes(binary(9000)), 1)
        .unwrap();
    let out = e.closed(PUBLISHER, "gone", 2);
    assert_eq!(keeps(&out), [&Action::Release(11)], "10 was sent: not kept");
    assert_eq!(e.counters().failed_publishes, 2);
}

#[test]
fn a_work_unit_binds_its_held_payload() {
    let mut e = ready("{}");
    let q = only_query(
        &e.publish_payload("work.render", None, &unit("u-1"), held(20, 65_536), 1)
            .unwrap(),
    );
    assert!(q.params.contains(&Param::Payload(20)), "{q:?}");
}

#[test]
fn a_read_for_one_recipient_holds_its_cell_and_the_delivery_names_it() {
    let mut e = ready("{}");
    e.subscribe(5, "cache.blob", None, 1).unwrap();
    let q = spilled(&mut e, "cache.blob", 10);
    let read = only_query(&e.notified(LISTENER, notified_by(&q, 1), 0, 1));
    assert_eq!(read_id(&read), 1);
    assert_eq!(read.hold_column, Some(0));
    let out = e.answered_cells(read.id, held_cell(77), 2);
    let delivered = deliveries(&out);
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].held, Some(77));
    assert!(delivered[0].payload.is_empty());
    assert!(keeps(&out).is_empty(), "used in the call it came in");
}

#[test]
fn a_read_for_several_recipients_takes_its_payload_as_bytes() {
    let mut e = ready("{}");
    e.subscribe(5, "cache.blob", None, 1).unwrap();
    e.subscribe(6, "cache.*", None, 1).unwrap();
    let q = spilled(&mut e, "cache.blob", 10);
    let read = only_query(&e.notified(LISTENER, notified_by(&q, 1), 0, 1));
    assert_eq!(read.hold_column, None, "a held payload is used once");
}

#[test]
fn a_held_read_answered_early_is_kept_until_its_turn_or_released() {
    let mut e = ready("{}");
    e.subscribe(5, "cache.*", None, 1).unwrap();
    let a = spilled(&mut e, "cache.a", 10);
    let b = spilled(&mut e, "cache.b", 11);
    let mut heard = notified_by(&a, 1);
    heard.extend(notified_by(&b, 2));
    let reads = queries(&e.notified(LISTENER, heard, 0, 1));
    assert_eq!(reads.len(), 2);
    let out = e.answered_cells(reads[1].id, held_cell(78), 2);
    assert!(deliveries(&out).is_empty(), "b waits for a");
    assert_eq!(keeps(&out), [&Action::Keep(78)]);
    let out = e.answered_cells(reads[0].id, held_cell(77), 3);
    let held: Vec<_> = deliveries(&out).iter().map(|d| d.held).collect();
    assert_eq!(held, [Some(77), Some(78)], "in arrival order");
    assert!(keeps(&out).is_empty());

    // Kept and then never delivered: released when the engine is replaced.
    let c = spilled(&mut e, "cache.c", 12);
    let d = spilled(&mut e, "cache.d", 13);
    let mut heard = notified_by(&c, 3);
    heard.extend(notified_by(&d, 4));
    let reads = queries(&e.notified(LISTENER, heard, 0, 4));
    e.answered_cells(reads[1].id, held_cell(80), 5);
    let (_, out) = e.replace(Config::default(), 7, 6);
    assert_eq!(keeps(&out), [&Action::Release(80)]);
}

#[test]
fn a_held_read_with_nobody_left_to_deliver_to_is_released() {
    let mut e = ready("{}");
    e.subscribe(5, "cache.*", None, 1).unwrap();
    let a = spilled(&mut e, "cache.a", 10);
    let b = spilled(&mut e, "cache.b", 11);
    let mut heard = notified_by(&a, 1);
    heard.extend(notified_by(&b, 2));
    let reads = queries(&e.notified(LISTENER, heard, 0, 1));
    e.answered_cells(reads[1].id, held_cell(78), 2);
    e.unsubscribe(5, 2);
    let out = e.answered_cells(reads[0].id, held_cell(77), 3);
    assert!(deliveries(&out).is_empty());
    assert_eq!(keeps(&out), [&Action::Release(78)], "77 was never kept");
}

#[test]
fn a_held_read_answered_after_its_timeout_is_not_kept() {
    let mut e = ready("{}");
    e.subscribe(5, "cache.*", None, 1).unwrap();
    let a = spilled(&mut e, "cache.a", 10);
    let b = spilled(&mut e, "cache.b", 11);
    let mut heard = notified_by(&a, 1);
    heard.extend(notified_by(&b, 2));
    let reads = queries(&e.notified(LISTENER, heard, 0, 1));
    // Both reads time out (lost); b's answer comes late: nothing waits for it.
    e.timer(1 + switchyard_plugin_pgbus::SPILL_READ_TIMEOUT_MS);
    let out = e.answered_cells(reads[1].id, held_cell(78), 20_000);
    assert!(keeps(&out).is_empty(), "{out:?}");
    assert!(deliveries(&out).is_empty());
}
