//! The leader's rules, table-driven: each case a row, the replicas' and
//! workers' reports, and the move the leader makes.

use std::collections::BTreeMap;

use switchyard_protocol::carrier::{CanBuild, Pin, Pins, ReplicaReport, WorkerReport};

use super::*;

const EPOCH: i64 = 7;

fn key(carrier: &str) -> SetKey {
    let pins = Pins::from([(
        carrier.to_string(),
        Pin {
            version: "0.1.0".into(),
            sha256: "ab".repeat(32),
        },
    )]);
    SetKey::new(carrier, pins)
}

fn row(phase: Phase, deadline_in_ms: i64) -> ClusterCarrier {
    ClusterCarrier {
        active: key("nats"),
        epoch: EPOCH,
        phase,
        deadline_in_ms: Some(deadline_in_ms),
        change_id: Some(1),
    }
}

fn prepare(target: &str, forced: bool) -> Phase {
    Phase::Prepare {
        target: key(target),
        forced,
    }
}

fn commit() -> Phase {
    Phase::Commit {
        draining: key("tunnel"),
    }
}

/// A replica at `epoch` that built `built` (labels, active first).
fn replica(id: &str, epoch: i64, built: &[&SetKey]) -> LiveReplica {
    LiveReplica {
        report: ReplicaReport {
            id: id.into(),
            version: "test".into(),
            epoch,
            ready: false,
            can_build: BTreeMap::new(),
        },
        built: built.iter().map(|k| k.label()).collect(),
        reported: true,
    }
}

fn cannot_build(mut replica: LiveReplica, set: &str, reason: &str) -> LiveReplica {
    replica.report.can_build.insert(
        set.into(),
        CanBuild {
            ok: false,
            reason: Some(reason.into()),
        },
    );
    replica
}

/// A worker that saw `epoch` and is attached to `attached`.
fn worker(node: &str, epoch: i64, attached: &[&str]) -> CarrierWorker {
    CarrierWorker {
        report: WorkerReport {
            node: node.into(),
            attached: attached.iter().map(|s| s.to_string()).collect(),
            epoch_seen: Some(epoch),
            cannot_follow: BTreeMap::new(),
            reported: true,
            demoted_reason: None,
        },
        state: NodeState::Healthy,
    }
}

fn cannot_follow(mut worker: CarrierWorker, set: &str) -> CarrierWorker {
    worker
        .report
        .cannot_follow
        .insert(set.into(), "no NATS URL".into());
    worker
}

#[test]
fn a_stable_row_is_tidied() {
    let moved = next_move(&row(Phase::Stable, 0), &[], &[]);
    assert_eq!(moved, Move::Tidy);
}

/// A prepare's case: its name, the replicas, the workers, the time left
/// and the move expected.
type PrepareCase = (
    &'static str,
    Vec<LiveReplica>,
    Vec<CarrierWorker>,
    i64,
    Move,
);

#[test]
fn a_prepare_commits_once_every_replica_built_and_every_worker_attached() {
    let (nats, tunnel) = (key("nats"), key("tunnel"));
    let ready = || {
        vec![
            replica("r1", EPOCH, &[&nats, &tunnel]),
            replica("r2", EPOCH, &[&nats, &tunnel]),
        ]
    };
    let cases: Vec<PrepareCase> = vec![
        (
            "all built and attached",
            ready(),
            vec![worker("w1", EPOCH, &["nats", "tunnel"])],
            5_000,
            Move::Commit,
        ),
        ("no workers at all", ready(), vec![], 5_000, Move::Commit),
        (
            "a replica behind the epoch",
            vec![
                replica("r1", EPOCH, &[&nats, &tunnel]),
                replica("r2", EPOCH - 1, &[&nats, &tunnel]),
            ],
            vec![],
            5_000,
            Move::Wait(vec!["replica r2 has not built `tunnel`".into()]),
        ),
        (
            "a replica that cannot build says why",
            vec![cannot_build(
                replica("r1", EPOCH, &[&nats]),
                "tunnel",
                "no component",
            )],
            vec![],
            5_000,
            Move::Wait(vec![
                "replica r1 has not built `tunnel`: no component".into(),
            ]),
        ),
        (
            "a worker not yet attached",
            ready(),
            vec![worker("w1", EPOCH, &["nats"])],
            5_000,
            Move::Wait(vec!["worker w1 has not attached to `tunnel`".into()]),
        ),
        (
            "a worker attached at an older epoch",
            ready(),
            vec![worker("w1", EPOCH - 1, &["nats", "tunnel"])],
            5_000,
            Move::Wait(vec!["worker w1 has not attached to `tunnel`".into()]),
        ),
        (
            "the timeout passed: abort with what it waited for",
            ready(),
            vec![worker("w1", EPOCH, &["nats"])],
            0,
            Move::Abort("the prepare timed out: worker w1 has not attached to `tunnel`".into()),
        ),
    ];
    for (name, replicas, workers, left, expected) in cases {
        let moved = next_move(&row(prepare("tunnel", false), left), &replicas, &workers);
        assert_eq!(moved, expected, "{name}");
    }
}

#[test]
fn workers_that_cannot_follow_hold_the_change_unless_it_is_forced() {
    let (nats, tunnel) = (key("nats"), key("tunnel"));
    let replicas = vec![replica("r1", EPOCH, &[&nats, &tunnel])];
    let workers = vec![cannot_follow(worker("w1", EPOCH, &["nats"]), "tunnel")];
    assert_eq!(
        next_move(&row(prepare("tunnel", false), 5_000), &replicas, &workers),
        Move::Wait(vec!["worker w1 cannot follow: no NATS URL".into()])
    );
    assert_eq!(
        next_move(&row(prepare("tunnel", true), 5_000), &replicas, &workers),
        Move::Commit
    );
}

#[test]
fn silent_demoted_and_unreported_workers_hold_nothing() {
    let (nats, tunnel) = (key("nats"), key("tunnel"));
    let replicas = vec![replica("r1", EPOCH, &[&nats, &tunnel])];
    let mut silent = worker("silent", EPOCH, &["nats"]);
    silent.state = NodeState::Unhealthy;
    let mut demoted = worker("demoted", EPOCH, &[]);
    demoted.report.demoted_reason = Some("not attached".into());
    let mut old = worker("old", 0, &[]);
    old.report.reported = false;
    let moved = next_move(
        &row(prepare("tunnel", false), 5_000),
        &replicas,
        &[silent, demoted, old],
    );
    assert_eq!(moved, Move::Commit);
}

#[test]
fn a_target_no_build_runs_is_aborted_at_once() {
    let moved = next_move(&row(prepare("carrier-pigeon", false), 5_000), &[], &[]);
    assert_eq!(moved, Move::Abort(UNKNOWN_TARGET.into()));
}

#[test]
fn a_version_upgrade_waits_for_the_new_label_not_the_set_name() {
    let old = key("nats");
    let mut new = key("nats");
    new.pins.get_mut("nats").unwrap().version = "0.2.0".into();
    let phase = Phase::Prepare {
        target: new.clone(),
        forced: false,
    };
    let replicas = vec![replica("r1", EPOCH, &[&old])];
    let workers = vec![worker("w1", EPOCH, &["nats"])];
    assert_eq!(
        next_move(&row(phase.clone(), 5_000), &replicas, &workers),
        Move::Wait(vec!["replica r1 has not built `nats`".into()])
    );
    let replicas = vec![replica("r1", EPOCH, &[&old, &new])];
    assert_eq!(
        next_move(&row(phase, 5_000), &replicas, &workers),
        Move::Commit
    );
}

#[test]
fn a_commit_settles_once_every_replica_acted_or_the_window_ends() {
    let (nats, tunnel) = (key("nats"), key("tunnel"));
    let cases: Vec<(&str, Vec<LiveReplica>, i64, Move)> = vec![
        (
            "all acted",
            vec![replica("r1", EPOCH, &[&nats, &tunnel])],
            5_000,
            Move::Settle { behind: 0 },
        ),
        (
            "one still on the old set first",
            vec![
                replica("r1", EPOCH, &[&nats]),
                replica("r2", EPOCH, &[&tunnel, &nats]),
            ],
            5_000,
            Move::Wait(vec!["replica r2 has not acted on the commit".into()]),
        ),
        (
            "one behind the epoch",
            vec![replica("r1", EPOCH - 1, &[&nats])],
            5_000,
            Move::Wait(vec!["replica r1 has not acted on the commit".into()]),
        ),
        (
            "the window ended with one behind",
            vec![
                replica("r1", EPOCH, &[&nats]),
                replica("r2", EPOCH - 1, &[&tunnel]),
            ],
            -1,
            Move::Settle { behind: 1 },
        ),
    ];
    for (name, replicas, left, expected) in cases {
        assert_eq!(
            next_move(&row(commit(), left), &replicas, &[]),
            expected,
            "{name}"
        );
    }
}
