//! The conformance suite every carrier passes, against its real server.
//! `switchyard carrier conformance <component.wasm> --config <json>` runs it
//! on a plugin author's component; the project's tests run it on ours.
//!
//! The configuration must allow the subject roots `jobs` and `cache`, and
//! `work` for the work queue (a carrier that refuses `work.*` does not
//! serve the work queue).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use switchyard_runtime::Runtime;
use tokio::sync::mpsc;

use crate::client::{Carrier, CarrierSetup};
use crate::component::ComponentSpec;
use crate::message::{Message, SendError};
use crate::queue::WorkQueue;

/// How long any one expectation may take.
const WAIT: Duration = Duration::from_secs(10);

/// The payload sizes every carrier carries whole (around pgbus's 8000-byte
/// notification limit, and a 64 KiB body).
pub const PAYLOAD_SIZES: [usize; 4] = [1, 7999, 8000, 65536];

/// What a check found when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passed {
    /// The behaviour holds.
    Yes,
    /// The carrier does not serve this seam (it refused, as it should).
    NotServed,
}

/// How a check passed, or why it failed.
pub type Outcome = Result<Passed, String>;

/// One check's outcome.
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// The check's name.
    pub name: &'static str,
    /// How it passed, or why it failed.
    pub outcome: Outcome,
    /// How long it took.
    pub elapsed: Duration,
}

type Check = fn(Arc<Carrier>, Arc<Carrier>) -> Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// Every check, in order.
const CHECKS: &[(&str, Check)] = &[
    (
        "delivery to every subscriber on both ends, at every size",
        |a, b| Box::pin(delivery(a, b)),
    ),
    ("* matches exactly one token", |a, _| Box::pin(one_token(a))),
    ("other wildcard forms are refused", |a, _| {
        Box::pin(other_wildcards(a))
    }),
    ("subjects outside the allowed roots are refused", |a, _| {
        Box::pin(outside_roots(a))
    }),
    ("unsubscribe removes only its own subscription", |a, _| {
        Box::pin(unsubscribe(a))
    }),
    ("a payload above the maximum is refused", |a, _| {
        Box::pin(above_maximum(a))
    }),
    (
        "a queue group gives each unit to exactly one member",
        |a, b| Box::pin(queue_group(a, b)),
    ),
    (
        "queued publishes keep their order; refusals are counted",
        |a, b| Box::pin(queued_publishes(a, b)),
    ),
    ("request and reply", |a, b| Box::pin(request_reply(a, b))),
    (
        "the work queue hands each unit to exactly one consumer, acknowledged",
        |a, b| Box::pin(work_queue(a, b)),
    ),
];

/// Starts two instances of the carrier (two ends) and runs every check.
pub async fn run(
    component: ComponentSpec,
    setup: CarrierSetup,
    runtime: Arc<Runtime>,
) -> Result<Vec<CheckResult>, String> {
    let start = |name: &str| {
        let mut component = component.clone();
        component.name = format!("{}-{name}", component.name);
        Carrier::start(component, setup.clone(), runtime.clone())
            .map_err(|e| format!("the carrier does not start: {e}"))
    };
    let (a, b) = (start("a")?, start("b")?);
    for carrier in [&a, &b] {
        if !carrier.wait_ready(WAIT).await {
            return Err(format!(
                "{} did not connect within {WAIT:?}",
                carrier.name()
            ));
        }
    }
    let mut results = Vec::new();
    for (name, check) in CHECKS {
        let started = Instant::now();
        let outcome = check(a.clone(), b.clone()).await;
        results.push(CheckResult {
            name,
            outcome,
            elapsed: started.elapsed(),
        });
    }
    let dropped = a.stats().dropped + b.stats().dropped;
    results.push(CheckResult {
        name: "no message dropped",
        outcome: if dropped == 0 {
            Ok(Passed::Yes)
        } else {
            Err(format!("{dropped} dropped"))
        },
        elapsed: Duration::ZERO,
    });
    Ok(results)
}

/// The failed checks of a run, as `name: why`.
pub fn failures(results: &[CheckResult]) -> Vec<String> {
    results
        .iter()
        .filter_map(|r| r.outcome.as_ref().err().map(|e| format!("{}: {e}", r.name)))
        .collect()
}

fn fail(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Everything this carrier sent before is in force: a marker it publishes
/// to itself has come back.
async fn round_trip(carrier: &Carrier) -> Result<(), String> {
    static MARKERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = MARKERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let subject = format!("jobs.conformance.marker{n}");
    let (_s, mut markers) = carrier.subscribe(&subject, None).await.map_err(fail)?;
    let started = Instant::now();
    while started.elapsed() < WAIT {
        carrier
            .publish(&subject, Bytes::new())
            .await
            .map_err(fail)?;
        // The subscription is in force once the server has it; until then, publish again.
        match tokio::time::timeout(Duration::from_millis(200), markers.recv()).await {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => return Err("the marker subscription closed".into()),
            Err(_) => continue,
        }
    }
    Err(format!("a marker did not come back within {WAIT:?}"))
}

async fn next(messages: &mut mpsc::Receiver<Message>) -> Result<Message, String> {
    match tokio::time::timeout(WAIT, messages.recv()).await {
        Ok(Some(m)) => Ok(m),
        Ok(None) => Err("the subscription closed".into()),
        Err(_) => Err(format!("nothing arrived within {WAIT:?}")),
    }
}

fn pattern(size: usize) -> Bytes {
    Bytes::from((0..size).map(|i| (i % 251) as u8).collect::<Vec<u8>>())
}

async fn delivery(a: Arc<Carrier>, b: Arc<Carrier>) -> Outcome {
    let (_sa, mut on_a) = a.subscribe("cache.conformance", None).await.map_err(fail)?;
    let (_sb, mut on_b) = b.subscribe("cache.conformance", None).await.map_err(fail)?;
    round_trip(&a).await?;
    round_trip(&b).await?;
    for size in PAYLOAD_SIZES {
        let payload = pattern(size);
        a.publish("cache.conformance", payload.clone())
            .await
            .map_err(fail)?;
        for (end, messages) in [("a", &mut on_a), ("b", &mut on_b)] {
            let m = next(messages)
                .await
                .map_err(|e| format!("{size} bytes to {end}: {e}"))?;
            if m.payload != payload || m.subject != "cache.conformance" {
                return Err(format!("{size} bytes to {end} arrived altered"));
            }
        }
    }
    Ok(Passed::Yes)
}

async fn one_token(a: Arc<Carrier>) -> Outcome {
    let (_s, mut messages) = a.subscribe("jobs.*.progress", None).await.map_err(fail)?;
    round_trip(&a).await?;
    a.publish("jobs.7.x.progress", Bytes::from_static(b"two"))
        .await
        .map_err(fail)?;
    a.publish("jobs.7.progress", Bytes::from_static(b"one"))
        .await
        .map_err(fail)?;
    match next(&mut messages).await?.payload.as_ref() {
        b"one" => Ok(Passed::Yes),
        other => Err(format!(
            "'jobs.*.progress' matched {:?}",
            String::from_utf8_lossy(other)
        )),
    }
}

async fn other_wildcards(a: Arc<Carrier>) -> Outcome {
    for bad in ["jobs.>", "jobs.a*", "jobs.*x", "jobs..progress", "jobs.a b"] {
        match a.subscribe(bad, None).await {
            Err(SendError::InvalidSubject(_)) => {}
            Err(other) => {
                return Err(format!(
                    "'{bad}' refused as {other:?}, not as an invalid subject"
                ));
            }
            Ok(_) => return Err(format!("'{bad}' was accepted")),
        }
    }
    Ok(Passed::Yes)
}

async fn outside_roots(a: Arc<Carrier>) -> Outcome {
    match a.publish("elsewhere.topic", Bytes::new()).await {
        Err(SendError::InvalidSubject(_)) => {}
        other => return Err(format!("publish outside the roots answered {other:?}")),
    }
    match a.subscribe("elsewhere.*", None).await {
        Err(SendError::InvalidSubject(_)) => Ok(Passed::Yes),
        Err(other) => Err(format!("subscribe outside the roots answered {other}")),
        Ok(_) => Err("subscribe outside the roots was accepted".into()),
    }
}

async fn unsubscribe(a: Arc<Carrier>) -> Outcome {
    let (kept, mut kept_messages) = a.subscribe("jobs.unsub", None).await.map_err(fail)?;
    let (dropped, mut dropped_messages) = a.subscribe("jobs.unsub", None).await.map_err(fail)?;
    drop(dropped);
    round_trip(&a).await?;
    a.publish("jobs.unsub", Bytes::from_static(b"x"))
        .await
        .map_err(fail)?;
    next(&mut kept_messages)
        .await
        .map_err(|e| format!("the other subscription lost its message: {e}"))?;
    round_trip(&a).await?;
    drop(kept);
    match dropped_messages.try_recv() {
        Ok(_) => Err("the removed subscription still received".into()),
        Err(_) => Ok(Passed::Yes),
    }
}

async fn above_maximum(a: Arc<Carrier>) -> Outcome {
    let max = a.max_payload();
    if max == 0 {
        return Err("the carrier reports no maximum payload".into());
    }
    match a
        .publish("jobs.big", Bytes::from(vec![0u8; max as usize + 1]))
        .await
    {
        Err(SendError::PayloadTooLarge(_, reported)) if reported == max => Ok(Passed::Yes),
        other => Err(format!("{} bytes answered {other:?}", max + 1)),
    }
}

/// Queued publishes (no verdict awaited) go out in order among answered
/// ones; one the carrier refuses is counted, and does not stop the rest.
async fn queued_publishes(a: Arc<Carrier>, b: Arc<Carrier>) -> Outcome {
    const EACH: usize = 50;
    let (_s, mut messages) = b.subscribe("cache.queued", None).await.map_err(fail)?;
    round_trip(&b).await?;
    round_trip(&a).await?;
    let refused = a.stats().refused;
    let mut expected = Vec::new();
    for half in ["middle", "end"] {
        for n in 0..EACH {
            let payload = Bytes::from(format!("{half}-{n}"));
            expected.push(payload.clone());
            a.publish_queued("cache.queued", payload)
                .await
                .map_err(fail)?;
        }
        a.publish_queued("elsewhere.topic", Bytes::new())
            .await
            .map_err(fail)?;
        let answered = Bytes::from(half);
        expected.push(answered.clone());
        a.publish("cache.queued", answered).await.map_err(fail)?;
    }
    // The last answered publish's verdict came after every queued one's.
    let counted = a.stats().refused - refused;
    if counted != 2 {
        return Err(format!(
            "2 refused queued publishes were counted as {counted}"
        ));
    }
    for (n, wanted) in expected.iter().enumerate() {
        let m = next(&mut messages)
            .await
            .map_err(|e| format!("message {n} of {}: {e}", expected.len()))?;
        if m.payload != wanted {
            return Err(format!(
                "message {n} was {:?}, not {:?}",
                String::from_utf8_lossy(&m.payload),
                String::from_utf8_lossy(wanted)
            ));
        }
    }
    Ok(Passed::Yes)
}

async fn queue_group(a: Arc<Carrier>, b: Arc<Carrier>) -> Outcome {
    const UNITS: usize = 200;
    let (_qa, mut on_a) = match a.subscribe("jobs.units", Some("workers")).await {
        Ok(subscribed) => subscribed,
        // A carrier that serves work queues elsewhere refuses queue groups.
        Err(SendError::Refused(_)) => return Ok(Passed::NotServed),
        Err(e) => return Err(fail(e)),
    };
    let (_qb, mut on_b) = b
        .subscribe("jobs.units", Some("workers"))
        .await
        .map_err(fail)?;
    round_trip(&a).await?;
    round_trip(&b).await?;
    for i in 0..UNITS {
        a.publish("jobs.units", Bytes::from(i.to_string()))
            .await
            .map_err(fail)?;
    }
    let mut seen = Vec::with_capacity(UNITS);
    while seen.len() < UNITS {
        tokio::select! {
            Some(m) = on_a.recv() => seen.push(m.payload),
            Some(m) = on_b.recv() => seen.push(m.payload),
            _ = tokio::time::sleep(WAIT) => return Err(format!("{} of {UNITS} units arrived", seen.len())),
        }
    }
    round_trip(&a).await?;
    if on_a.try_recv().is_ok() || on_b.try_recv().is_ok() {
        return Err("a unit arrived twice".into());
    }
    seen.sort();
    seen.dedup();
    match seen.len() == UNITS {
        true => Ok(Passed::Yes),
        false => Err(format!("{} distinct units of {UNITS}", seen.len())),
    }
}

async fn request_reply(a: Arc<Carrier>, b: Arc<Carrier>) -> Outcome {
    let (_s, mut requests) = b.subscribe("jobs.echo", None).await.map_err(fail)?;
    round_trip(&b).await?;
    let responder = tokio::spawn(async move {
        let request = next(&mut requests).await?;
        let inbox = request
            .reply_to
            .ok_or("a request carries no reply subject")?;
        b.publish(&inbox, request.payload).await.map_err(fail)
    });
    let reply = a
        .request("jobs.echo", Bytes::from_static(b"ping"), WAIT)
        .await
        .map_err(fail)?;
    responder.await.map_err(fail)??;
    match reply.payload.as_ref() {
        b"ping" => Ok(Passed::Yes),
        other => Err(format!("the reply was {other:?}")),
    }
}

async fn work_queue(a: Arc<Carrier>, b: Arc<Carrier>) -> Outcome {
    const UNITS: usize = 100;
    let producer = WorkQueue::new(a.clone(), WAIT);
    let mut consumers = Vec::new();
    for carrier in [a, b] {
        match WorkQueue::new(carrier, WAIT).consume("conformance").await {
            Ok(units) => consumers.push(units),
            Err(SendError::Refused(_) | SendError::InvalidSubject(_)) => {
                return Ok(Passed::NotServed);
            }
            Err(e) => return Err(fail(e)),
        }
    }
    let (handled, mut ids) = mpsc::unbounded_channel();
    for mut units in consumers {
        let handled = handled.clone();
        tokio::spawn(async move {
            while let Some(unit) = units.next().await {
                let _ = handled.send(unit.id.clone());
                if unit.done().await.is_err() {
                    return;
                }
            }
        });
    }
    drop(handled);
    for i in 0..UNITS {
        let id = format!("unit-{i}");
        producer
            .submit("conformance", &id, Bytes::from(id.clone()))
            .await
            .map_err(|e| format!("submitting {id}: {e}"))?;
    }
    let mut seen = Vec::with_capacity(UNITS);
    while seen.len() < UNITS {
        match tokio::time::timeout(WAIT, ids.recv()).await {
            Ok(Some(id)) => seen.push(id),
            _ => return Err(format!("{} of {UNITS} units were handled", seen.len())),
        }
    }
    // A marker unit submitted last: a unit handled twice would have come
    // before it.
    producer
        .submit("conformance", "unit-marker", Bytes::new())
        .await
        .map_err(|e| format!("submitting the marker: {e}"))?;
    loop {
        match tokio::time::timeout(WAIT, ids.recv()).await {
            Ok(Some(id)) if id == "unit-marker" => break,
            Ok(Some(id)) => seen.push(id),
            _ => return Err("the marker unit was not handled".into()),
        }
    }
    let total = seen.len();
    seen.sort();
    seen.dedup();
    match (seen.len(), total) {
        (UNITS, UNITS) => Ok(Passed::Yes),
        (distinct, total) => Err(format!(
            "{distinct} distinct units of {UNITS}, {total} handled"
        )),
    }
}
