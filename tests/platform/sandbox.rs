//! Misbehaving components: each is stopped within its deadline, as an error
//! of that call only, while other calls keep succeeding.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use switchyard_runtime::admission::{
    AdmissionPoint, AdmissionRequest, Chain, ChainEntry, Decision,
};
use switchyard_runtime::loader::ComponentSource;
use switchyard_runtime::policy::{PolicyPlugin, PolicySource};
use switchyard_runtime::{CallError, LoadError, Runtime, RuntimeConfig};
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins::{component, sha256};
use switchyard_tests::replica::Replica;

use crate::requests::inference;

const DEADLINE: Duration = Duration::from_millis(50);

fn runtime() -> Arc<Runtime> {
    runtime_with_deadline(DEADLINE)
}

fn runtime_with_deadline(call_deadline: Duration) -> Arc<Runtime> {
    Runtime::new(RuntimeConfig {
        call_deadline,
        memory_limit_bytes: 32 << 20,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

fn load(runtime: &Arc<Runtime>, name: &str) -> Result<Arc<PolicyPlugin>, LoadError> {
    let bytes = component(name);
    PolicyPlugin::load(
        runtime,
        PolicySource {
            component: ComponentSource {
                name,
                version: "test",
                bytes: &bytes,
                sha256: &sha256(&bytes),
            },
            settings: "{}",
        },
    )
}

fn request() -> AdmissionRequest {
    AdmissionRequest::from_json(
        AdmissionPoint::Inference,
        inference("p", "demo-tiny", Some(10)),
    )
    .unwrap()
}

/// Runs `bad` while a well-behaved policy is called in a loop on another
/// thread; returns the bad call's result and time, and how many good calls
/// succeeded (and failed) meanwhile.
fn beside_good_calls(
    runtime: &Arc<Runtime>,
    bad: impl FnOnce() -> Result<Decision, CallError>,
) -> (Result<Decision, CallError>, Duration, u64, u64) {
    let good = load(runtime, "well-behaved").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let worker = {
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) || ok.load(Ordering::Relaxed) == 0 {
                match good.evaluate(&request()) {
                    Ok(Decision::Allow) => ok.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        })
    };
    let started = Instant::now();
    let result = bad();
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    (
        result,
        elapsed,
        ok.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
    )
}

#[test]
fn an_endless_loop_is_interrupted_at_its_deadline() {
    let runtime = runtime();
    let policy = load(&runtime, "endless-loop").unwrap();
    let (result, elapsed, ok, failed) = beside_good_calls(&runtime, || policy.evaluate(&request()));
    assert_eq!(result, Err(CallError::Timeout(DEADLINE.as_millis() as u64)));
    assert!(
        elapsed >= DEADLINE && elapsed < Duration::from_secs(2),
        "interrupted after {elapsed:?}"
    );
    assert!(
        ok > 0 && failed == 0,
        "good calls meanwhile: {ok} ok, {failed} failed"
    );
    // The trapped instance was dropped; the next call gets a fresh one and is stopped again.
    assert_eq!(
        policy.evaluate(&request()),
        Err(CallError::Timeout(DEADLINE.as_millis() as u64))
    );
    assert_eq!(policy.metrics().counts().timeouts, 2);
}

#[test]
fn an_endless_loop_after_the_ticker_slept_is_still_interrupted() {
    let runtime = runtime();
    let policy = load(&runtime, "endless-loop").unwrap();
    // No call for longer than any deadline: the epoch ticker sleeps.
    let started = Instant::now();
    while !runtime.ticker_asleep() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the ticker never slept"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The call wakes it, and its deadline counts from there.
    let started = Instant::now();
    assert_eq!(
        policy.evaluate(&request()),
        Err(CallError::Timeout(DEADLINE.as_millis() as u64))
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "interrupted after {:?}",
        started.elapsed()
    );
}

#[test]
fn a_sleep_in_a_wasi_wait_is_stopped_at_its_deadline() {
    // The guest waits inside a host call (`wasi:io/poll` on a clock), where
    // epoch interruption cannot reach it: the host's wait must end at the
    // deadline on its own.
    let runtime = runtime();
    let policy = load(&runtime, "sleep").unwrap();
    let (result, elapsed, ok, failed) = beside_good_calls(&runtime, || policy.evaluate(&request()));
    assert_eq!(result, Err(CallError::Timeout(DEADLINE.as_millis() as u64)));
    assert!(
        elapsed >= DEADLINE && elapsed < Duration::from_secs(2),
        "stopped after {elapsed:?}"
    );
    assert!(
        ok > 0 && failed == 0,
        "good calls meanwhile: {ok} ok, {failed} failed"
    );
    // The stopped instance was dropped; a fresh one is stopped the same way.
    assert_eq!(
        policy.evaluate(&request()),
        Err(CallError::Timeout(DEADLINE.as_millis() as u64))
    );
    assert_eq!(policy.metrics().counts().timeouts, 2);
}

/// A chain of one policy, enforced, failing closed.
fn chain_of(policy: Arc<PolicyPlugin>) -> Arc<Chain> {
    Arc::new(Chain::new(
        AdmissionPoint::Inference,
        1,
        vec![ChainEntry {
            policy,
            mode: Default::default(),
            fail: Default::default(),
            log: Default::default(),
        }],
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_judges_on_the_callers_task_until_a_policy_waits_in_wasi() {
    let runtime = runtime();
    let quick = chain_of(load(&runtime, "well-behaved").unwrap());
    for _ in 0..3 {
        let verdict = quick.evaluate_here(&request()).expect("judged here");
        assert_eq!(verdict.decision, Decision::Allow);
    }
    assert!(quick.inline.is_open());

    // Writing to stderr is a WASI call that blocks on tokio, which an async
    // worker cannot: the call is handed back, and the chain moves for good.
    let chatty = chain_of(load(&runtime, "stderr").unwrap());
    assert!(chatty.evaluate_here(&request()).is_none());
    assert!(!chatty.inline.is_open());
    assert!(chatty.evaluate_here(&request()).is_none());
    // On a blocking thread the same policy answers, and nothing counts the
    // handed-back call as its failure.
    let verdict = tokio::task::spawn_blocking({
        let chatty = chatty.clone();
        move || chatty.evaluate(request())
    })
    .await
    .unwrap();
    assert_eq!(verdict.decision, Decision::Allow, "{verdict:?}");
    assert_eq!(chatty.entries[0].policy.metrics().counts().errors, 0);
    // The quick chain was not moved by its neighbour.
    assert!(quick.evaluate_here(&request()).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_runs_to_its_deadline_moves_its_chain_off_the_async_workers() {
    let runtime = runtime();
    let chain = chain_of(load(&runtime, "endless-loop").unwrap());
    let verdict = chain.evaluate_here(&request()).expect("answered here");
    assert_eq!(verdict.steps[0].error.as_ref().unwrap().kind, "timeout");
    assert!(matches!(verdict.decision, Decision::Deny(_)), "{verdict:?}");
    assert!(
        !chain.inline.is_open(),
        "the next call must not hold an async worker for its deadline"
    );
}

#[test]
fn a_memory_hog_hits_the_cap() {
    // A deadline far away, so that the cap (not the clock) stops it even
    // when a loaded machine makes touching 32 MiB slow.
    let runtime = runtime_with_deadline(Duration::from_secs(10));
    let policy = load(&runtime, "memory-hog").unwrap();
    let (result, elapsed, ok, failed) = beside_good_calls(&runtime, || policy.evaluate(&request()));
    assert_eq!(result, Err(CallError::MemoryLimit(32 << 20)));
    assert!(
        elapsed < Duration::from_secs(10),
        "stopped after {elapsed:?}"
    );
    assert!(
        ok > 0 && failed == 0,
        "good calls meanwhile: {ok} ok, {failed} failed"
    );
    assert_eq!(policy.metrics().counts().memory_limits, 1);
}

#[test]
fn a_panic_is_a_trap_of_that_call_only() {
    let runtime = runtime();
    let policy = load(&runtime, "panic").unwrap();
    let (result, _, ok, failed) = beside_good_calls(&runtime, || policy.evaluate(&request()));
    assert!(matches!(result, Err(CallError::Trap(_))), "{result:?}");
    assert!(
        ok > 0 && failed == 0,
        "good calls meanwhile: {ok} ok, {failed} failed"
    );
    assert_eq!(policy.metrics().counts().traps, 1);
}

#[test]
fn settings_validation_that_never_returns_fails_the_load_in_time() {
    let runtime = runtime();
    // The first load compiles; time only the second, which finds the component compiled.
    assert!(load(&runtime, "hang-settings").is_err());
    let (result, elapsed, ok, failed) =
        beside_good_calls(&runtime, || match load(&runtime, "hang-settings") {
            Err(LoadError::Instantiate(e)) => Err(e),
            other => panic!("expected a failed load, got {other:?}"),
        });
    assert_eq!(result, Err(CallError::Timeout(DEADLINE.as_millis() as u64)));
    assert!(
        elapsed < Duration::from_secs(2),
        "stopped after {elapsed:?}"
    );
    assert!(
        ok > 0 && failed == 0,
        "good calls meanwhile: {ok} ok, {failed} failed"
    );
}

#[test]
fn components_of_another_world_or_digest_are_refused_before_compiling() {
    let runtime = runtime();
    match load(&runtime, "other-world") {
        Err(LoadError::UnsupportedWorld { found, served }) => {
            assert!(found.contains("example:other"), "{found}");
            assert!(served.contains("switchyard:policy/admission-policy@0.1.0"));
        }
        other => panic!("expected unsupported_world, got {other:?}"),
    }
    let bytes = component("max-tokens");
    let wrong = PolicyPlugin::load(
        &runtime,
        PolicySource {
            component: ComponentSource {
                name: "m",
                version: "1",
                bytes: &bytes,
                sha256: &sha256(b"x"),
            },
            settings: "{}",
        },
    );
    assert!(
        matches!(wrong, Err(LoadError::DigestMismatch { .. })),
        "{wrong:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_denies_and_fail_open_allows() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    assert_eq!(
        replica.push("panic", "1", &component("panic")).await.0,
        StatusCode::CREATED
    );
    assert_eq!(
        replica
            .push("loop", "1", &component("endless-loop"))
            .await
            .0,
        StatusCode::CREATED
    );
    let request = inference("p", "demo-tiny", Some(10));

    // Closed is the default.
    let (status, body) = replica
        .set_chain("inference", json!([{"plugin": "panic", "version": "1"}]))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, verdict) = replica.evaluate("inference", &request).await;
    assert_eq!(verdict["decision"], "deny", "{verdict}");
    assert_eq!(verdict["code"], "policy_error");
    assert_eq!(verdict["steps"][0]["error"]["kind"], "trap");

    let (status, _) = replica
        .set_chain(
            "inference",
            json!([{"plugin": "panic", "version": "1", "fail": "open"}, {"plugin": "loop", "version": "1", "fail": "open"}]),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, verdict) = replica.evaluate("inference", &request).await;
    assert_eq!(verdict["decision"], "allow", "{verdict}");
    assert_eq!(verdict["steps"][1]["error"]["kind"], "timeout");
    assert_eq!(verdict["steps"][1]["enforced"], false);

    // A policy whose settings validation never returns cannot be bound, and the server goes on.
    assert_eq!(
        replica
            .push("hang", "1", &component("hang-settings"))
            .await
            .0,
        StatusCode::CREATED
    );
    let (status, body) = replica
        .set_chain("inference", json!([{"plugin": "hang", "version": "1"}]))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "plugin_failed");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deadline"),
        "{body}"
    );
    let (_, verdict) = replica.evaluate("inference", &request).await;
    assert_eq!(
        verdict["decision"], "allow",
        "the previous chain still serves: {verdict}"
    );
    replica.stop().await;
}

/// A replica whose `inference` chain is the one fixture `component`
/// (version 1 of `plugin`); the temp dir holds its data.
async fn replica_judging_with(plugin: &str, fixture: &str) -> (Replica, tempfile::TempDir) {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    assert_eq!(
        replica.push(plugin, "1", &component(fixture)).await.0,
        StatusCode::CREATED
    );
    let (status, body) = replica
        .set_chain("inference", json!([{"plugin": plugin, "version": "1"}]))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    (replica, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_policy_fails_closed_at_the_deadline_and_healthz_still_answers() {
    let (replica, _dir) = replica_judging_with("sleeper", "sleep").await;
    let request = inference("p", "demo-tiny", Some(10));
    let healthz = async {
        let response = replica
            .http
            .get(format!("{}/healthz", replica.url))
            .send()
            .await
            .expect("healthz answered");
        response.status()
    };
    let started = Instant::now();
    let ((_, verdict), health) = tokio::join!(replica.evaluate("inference", &request), healthz);
    let elapsed = started.elapsed();
    assert_eq!(health, StatusCode::OK);
    assert_eq!(verdict["decision"], "deny", "{verdict}");
    assert_eq!(verdict["code"], "policy_error", "{verdict}");
    assert_eq!(verdict["steps"][0]["error"]["kind"], "timeout", "{verdict}");
    // The fixture sleeps 20 s; the replica's deadline is 100 ms.
    assert!(
        elapsed < Duration::from_secs(5),
        "answered after {elapsed:?}"
    );
    let status = replica
        .http
        .get(format!("{}/healthz", replica.url))
        .send()
        .await
        .expect("healthz answered")
        .status();
    assert_eq!(status, StatusCode::OK);
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_writes_to_stderr_answers_through_the_replica() {
    let (replica, _dir) = replica_judging_with("chatty", "stderr").await;
    let request = inference("p", "demo-tiny", Some(10));
    // The first call is handed from the async worker to a blocking thread
    // mid-call; the second starts there.
    for _ in 0..2 {
        let (_, verdict) = replica.evaluate("inference", &request).await;
        assert_eq!(verdict["decision"], "allow", "{verdict}");
        assert!(verdict["steps"][0].get("error").is_none(), "{verdict}");
    }
    replica.stop().await;
}

#[test]
fn fuel_stops_a_loop_before_the_deadline_when_metering_is_on() {
    let runtime = Runtime::new(RuntimeConfig {
        call_deadline: Duration::from_secs(10),
        fuel_per_call: Some(20_000_000),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let policy = load(&runtime, "endless-loop").unwrap();
    let started = Instant::now();
    assert_eq!(policy.evaluate(&request()), Err(CallError::FuelExhausted));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "fuel ran out before the deadline"
    );
    // A well-behaved policy has plenty for its calls.
    let good = load(&runtime, "well-behaved").unwrap();
    for _ in 0..100 {
        assert_eq!(good.evaluate(&request()), Ok(Decision::Allow));
    }
}
