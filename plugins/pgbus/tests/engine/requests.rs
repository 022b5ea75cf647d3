//! Request and reply through the bus: the inbox, replies inline or spilled,
//! and timeouts.

use switchyard_plugin_pgbus::{
    Action, CarrierError, Delivery, Engine, Header, Reply, notification, sql,
};

use crate::support::*;

/// Sends request `id` and answers its notify; the inbox subject it named.
fn send(e: &mut Engine, id: u64, timeout_ms: u64, now: u64) -> (String, Vec<Action>) {
    let out = e
        .request(
            id,
            "jobs.svc.ping",
            &[Header::new("h", "1")],
            b"ping".to_vec(),
            timeout_ms,
            now,
        )
        .unwrap();
    let q = only_query(&out);
    assert_eq!(q.sql, sql::NOTIFY);
    let notification::Notice::Inline(m) = notification::decode(text(&q, 1)).unwrap() else {
        panic!("inline");
    };
    assert_eq!(m.subject, "jobs.svc.ping");
    assert_eq!(m.payload, b"ping");
    e.answered(q.id, Ok(rows(b"")), now);
    let inbox = m.reply_to.expect("a reply subject");
    (inbox, out)
}

#[test]
fn the_reply_to_the_inbox_completes_the_request() {
    let mut e = ready("{}");
    let (inbox, _) = send(&mut e, 7, 5000, 100);
    assert!(
        inbox.starts_with("_INBOX.") && inbox.ends_with(".7"),
        "{inbox}"
    );

    // The responder publishes to the inbox; the database notifies everyone.
    let payload = base64(b"pong");
    let out = e.notified(
        LISTENER,
        vec![heard(format!("m {inbox}  YQ:Yg {payload}"))],
        0,
        200,
    );
    assert_eq!(
        effects(&out),
        vec![Action::Reply(Reply {
            request: 7,
            outcome: Ok(Delivery {
                subscription: 0,
                subject: inbox.clone(),
                reply_to: None,
                headers: vec![Header::new("a", "b")],
                payload: b"pong".to_vec(),
                held: None,
            }),
        })]
    );
    // Answered once.
    let again = e.notified(
        LISTENER,
        vec![heard(format!("m {inbox}   {payload}"))],
        0,
        300,
    );
    assert_eq!(effects(&again), vec![]);
    assert_eq!(e.timer(5100), vec![Action::SetTimer(10_000 - 5100)]);
}

#[test]
fn a_spilled_reply_is_read_first() {
    let mut e = ready("{}");
    let (inbox, _) = send(&mut e, 3, 5000, 0);
    let out = e.notified(LISTENER, vec![heard(format!("s 40 {inbox}  "))], 0, 10);
    let read = only_query(&out);
    assert_eq!(read_id(&read), 40);
    let out = e.answered(read.id, Ok(rows(&binary(70_000))), 20);
    let [
        Action::Reply(Reply {
            request: 3,
            outcome: Ok(d),
        }),
    ] = &effects(&out)[..]
    else {
        panic!("{out:?}");
    };
    assert_eq!(d.payload, binary(70_000));
}

#[test]
fn no_reply_within_the_timeout() {
    let mut e = ready("{}");
    let (inbox, out) = send(&mut e, 8, 1000, 0);
    // The deadline comes before the retention tick: the timer moves closer.
    assert_eq!(timer(&out), Some(1000));
    assert_eq!(effects(&e.timer(999)), vec![]);
    assert_eq!(
        effects(&e.timer(1000)),
        vec![Action::Reply(Reply {
            request: 8,
            outcome: Err(CarrierError::Timeout),
        })]
    );
    // A late reply is nobody's.
    let late = e.notified(LISTENER, vec![heard(format!("m {inbox}   "))], 0, 1500);
    assert_eq!(effects(&late), vec![]);
}

#[test]
fn another_frontends_inbox_is_not_ours() {
    let mut e = ready("{}");
    let (inbox, _) = send(&mut e, 1, 1000, 0);
    let foreign = inbox.replace("_INBOX.", "_INBOX.x");
    let out = e.notified(LISTENER, vec![heard(format!("m {foreign}   "))], 0, 10);
    assert_eq!(effects(&out), vec![]);
}

#[test]
fn requests_are_refused_like_publishes() {
    let (mut idle, _) = start("{}");
    assert_eq!(
        idle.request(1, "jobs.svc", &[], Vec::new(), 1000, 0),
        Err(CarrierError::NotConnected)
    );
    let mut e = ready("{}");
    assert!(matches!(
        e.request(1, "elsewhere.svc", &[], Vec::new(), 1000, 0),
        Err(CarrierError::InvalidSubject(_))
    ));
    assert!(matches!(
        e.request(1, "jobs.svc", &[], vec![0; 1_048_577], 1000, 0),
        Err(CarrierError::PayloadTooLarge(1_048_577, 1_048_576))
    ));
    send(&mut e, 1, 1000, 0);
    assert!(matches!(
        e.request(1, "jobs.svc", &[], Vec::new(), 1000, 0),
        Err(CarrierError::Refused(_))
    ));
}

#[test]
fn the_inbox_depends_on_the_seed() {
    let inbox = |seed| {
        let (mut e, out) = Engine::new(switchyard_plugin_pgbus::Config::default(), seed, 0);
        let mut setup = Vec::new();
        for a in out {
            if let Action::Open(h) = a {
                setup.extend(queries(&e.opened(h, 0)));
            }
        }
        for q in setup {
            e.answered(q.id, answer_for(&q), 0);
        }
        send(&mut e, 1, 1000, 0).0
    };
    assert_eq!(inbox(1), inbox(1));
    assert_ne!(inbox(1), inbox(2));
}

fn base64(bytes: &[u8]) -> String {
    let text = notification::Envelope::new("x", None, &[]).inline(bytes);
    text.rsplit(' ').next().unwrap().to_owned()
}
