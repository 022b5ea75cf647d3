use super::*;

fn counters() -> Arc<UsageCounters> {
    Arc::new(UsageCounters::default())
}

fn key(id: &str, team: Option<&str>) -> Caller {
    Caller {
        key_id: id.into(),
        scopes: vec!["inference".into()],
        team: team.map(str::to_string),
    }
}

#[test]
fn a_key_counts_for_itself_and_its_team_a_peer_for_itself() {
    assert_eq!(subjects(&key("k1", Some("red"))), ["key:k1", "team:red"]);
    assert_eq!(subjects(&key("k1", None)), ["key:k1"]);
    assert_eq!(subjects(&key("peer:acme", None)), ["peer:acme"]);
}

#[test]
fn the_estimate_counts_until_the_engines_tokens_replace_it() {
    let c = counters();
    let charge = c.charge(vec!["key:k1".into(), "team:red".into()], 100);
    let during = c.read("team:red");
    assert_eq!(
        (
            during.requests_last_minute,
            during.tokens_last_minute,
            during.in_flight
        ),
        (1, 100, 1)
    );
    charge.settle(30);
    for subject in ["key:k1", "team:red"] {
        let after = c.read(subject);
        assert_eq!(after.requests_last_minute, 1, "{subject}");
        assert_eq!(after.tokens_last_minute, 30, "{subject}");
        assert_eq!((after.tokens_today, after.tokens_this_month), (30, 30));
        assert_eq!(after.in_flight, 0);
        assert!((1..=60_000).contains(&after.minute_reset_ms), "{after:?}");
    }
}

#[test]
fn a_refund_keeps_the_request_and_drops_its_tokens_a_drop_keeps_the_estimate() {
    let c = counters();
    c.charge(vec!["key:k1".into()], 50).refund();
    let refunded = c.read("key:k1");
    assert_eq!(
        (refunded.requests_last_minute, refunded.tokens_last_minute),
        (1, 0)
    );
    drop(c.charge(vec!["key:k1".into()], 50));
    let dropped = c.read("key:k1");
    assert_eq!(
        (dropped.requests_last_minute, dropped.tokens_last_minute),
        (2, 50)
    );
    assert_eq!(dropped.in_flight, 0);
}

#[test]
fn another_replicas_changes_and_requests_in_flight_are_added() {
    let (a, b) = (counters(), counters());
    let charge = a.charge(vec!["key:k1".into()], 10);
    let message = a.take_outbox("a").expect("a change to send");
    assert_eq!(message.counts.len(), 1);
    assert_eq!(
        (message.counts[0].requests, message.counts[0].tokens),
        (1, 10)
    );
    assert_eq!(message.counts[0].in_flight, 1);
    b.apply(&message);
    let seen = b.read("key:k1");
    assert_eq!(
        (
            seen.requests_last_minute,
            seen.tokens_last_minute,
            seen.in_flight
        ),
        (1, 10, 1)
    );
    // Still in flight: said again with no change; settled: the correction.
    let again = a.take_outbox("a").expect("in flight is said again");
    assert_eq!(
        (again.counts[0].requests, again.counts[0].in_flight),
        (0, 1)
    );
    charge.settle(4);
    b.apply(&a.take_outbox("a").unwrap());
    let settled = b.read("key:k1");
    assert_eq!((settled.tokens_last_minute, settled.in_flight), (4, 0));
    assert!(a.take_outbox("a").is_none(), "nothing left to say");
}

#[test]
fn a_seeded_day_and_month_start_from_the_database() {
    let c = counters();
    c.seed("team:red", 700, 9_000);
    let read = c.read("team:red");
    assert_eq!(
        (
            read.tokens_today,
            read.tokens_this_month,
            read.tokens_last_minute
        ),
        (700, 9_000, 0)
    );
    assert_eq!(read.minute_reset_ms, 0);
    assert!(read.day_reset_ms <= 86_400_000 && read.month_reset_ms >= read.day_reset_ms);
    assert_eq!(c.read("team:blue").tokens_this_month, 0);
}
