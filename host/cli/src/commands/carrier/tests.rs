//! The status and preflight as printed, and the phases of a waited-on
//! change.

use std::collections::BTreeMap;

use clap::Parser;
use serde_json::json;

use super::*;
use crate::cli::{CarrierCommand, Cli, Command};
use switchyard_protocol::carrier::Blocker;

fn status(value: Value) -> CarrierStatus {
    serde_json::from_value(value).unwrap()
}

#[test]
fn switch_takes_a_target_repeated_plugins_and_its_flags() {
    let cli = Cli::try_parse_from([
        "switchyard",
        "carrier",
        "switch",
        "--to",
        "nats",
        "--plugin",
        "nats@0.2.0",
        "--plugin",
        "tunnel@0.3.0",
        "--dry-run",
        "--force",
        "--yes",
        "--wait",
    ])
    .unwrap();
    let Command::Carrier(CarrierCommand::Switch(args)) = cli.command else {
        panic!("not a switch");
    };
    assert_eq!(args.to, "nats");
    assert_eq!(
        args.plugins,
        [
            ("nats".into(), "0.2.0".into()),
            ("tunnel".into(), "0.3.0".into())
        ]
    );
    assert!(args.dry_run && args.force && args.yes && args.wait);

    let plain = Cli::try_parse_from(["switchyard", "carrier", "switch", "--to", "tunnel"]).unwrap();
    let Command::Carrier(CarrierCommand::Switch(args)) = plain.command else {
        panic!("not a switch");
    };
    assert!(args.plugins.is_empty() && !args.dry_run && !args.force && !args.yes && !args.wait);

    for bad in [
        vec!["switchyard", "carrier", "switch"],
        vec![
            "switchyard",
            "carrier",
            "switch",
            "--to",
            "nats",
            "--plugin",
            "nats",
        ],
        vec![
            "switchyard",
            "carrier",
            "switch",
            "--to",
            "nats",
            "--plugin",
            "@0.1.0",
        ],
    ] {
        assert!(Cli::try_parse_from(&bad).is_err(), "{bad:?}");
    }
    assert!(Cli::try_parse_from(["switchyard", "carrier", "status", "--json"]).is_ok());
    assert!(Cli::try_parse_from(["switchyard", "carrier", "abort"]).is_ok());
}

#[test]
fn status_prints_the_row_the_replicas_and_the_workers() {
    let shown = render_status(&status(json!({
        "carrier": "nats",
        "plugins": {"nats": {"version": "0.1.0", "sha256": "ab".repeat(32)}},
        "epoch": 8, "state": "commit", "target": null, "draining": "tunnel",
        "drain_left_ms": 2500,
        "replicas": [
            {"id": "r1", "version": "0.4.0", "epoch": 8, "ready": true,
             "can_build": {"nats": {"ok": true}, "tunnel": {"ok": true}}},
            {"id": "replica-two", "version": "0.4.0", "epoch": 7, "ready": false,
             "can_build": {"nats": {"ok": false, "reason": "no NATS URL"}}}
        ],
        "workers": [
            {"node": "n1", "attached": ["nats", "tunnel"], "epoch_seen": 8, "cannot_follow": {}},
            {"node": "n2", "attached": ["tunnel"], "epoch_seen": null,
             "cannot_follow": {"nats": "no routable --address"}}
        ],
        "in_flight": {"streams": 0, "units": 0}, "settings": {}
    })));
    assert_eq!(
        shown,
        "\
carrier:    nats
plugins:    nats 0.1.0 (sha256 abababababab)
epoch:      8
state:      commit
target:     -
draining:   tunnel
drain left: 2.5 s

replicas (2)
  ID           VERSION  EPOCH  READY  CAN BUILD
  r1           0.4.0    8      yes    nats ok, tunnel ok
  replica-two  0.4.0    7      no     nats no (no NATS URL)

workers (2)
  NODE  ATTACHED      EPOCH SEEN  CANNOT FOLLOW
  n1    nats, tunnel  8           -
  n2    tunnel        -           nats (no routable --address)
"
    );
}

#[test]
fn the_preflight_lists_its_blockers_and_the_live_replicas() {
    let preflight = Preflight {
        ok: false,
        blockers: vec![Blocker {
            code: blockers::WORKER_CANNOT_FOLLOW.into(),
            message: "node n2: no routable --address".into(),
        }],
        report: status(json!({"carrier": "tunnel", "replicas": [
            {"id": "r1", "version": "0.4.0", "epoch": 3, "ready": true,
             "can_build": {"nats": {"ok": true}}}
        ]})),
    };
    assert_eq!(
        render_preflight("nats", &preflight),
        "\
preflight → nats: blocked
  blocker worker_cannot_follow: node n2: no routable --address

replicas (1)
  ID  VERSION  EPOCH  READY  CAN BUILD
  r1  0.4.0    3      yes    nats ok
"
    );
    assert!(!goes_ahead(&preflight, false));
    assert!(
        goes_ahead(&preflight, true),
        "force overrides worker blockers"
    );
    let replica = Preflight {
        blockers: vec![Blocker {
            code: blockers::REPLICA_CANNOT_BUILD.into(),
            message: "r1: no NATS URL".into(),
        }],
        ..preflight
    };
    assert!(
        !goes_ahead(&replica, true),
        "force never overrides a replica"
    );
}

fn row(state: &str, carrier: &str, epoch: i64) -> CarrierStatus {
    status(json!({"carrier": carrier, "epoch": epoch, "state": state,
        "draining": if state == "commit" { json!("nats") } else { Value::Null },
        "drain_left_ms": 30000,
        "plugins": {carrier: {"version": "0.2.0", "sha256": "00"}}}))
}

#[test]
fn wait_draws_each_phase_once_with_its_time_until_settled() {
    let mut phases = Phases::new("tunnel", BTreeMap::new(), 5);
    let at = Duration::from_millis;
    let (lines, end) = phases.step(&row("prepare", "nats", 5), at(10));
    assert_eq!(
        lines,
        ["prepare     0.01 s  every replica builds tunnel beside nats"]
    );
    assert_eq!(end, None);
    assert_eq!(
        phases.step(&row("prepare", "nats", 5), at(210)),
        (vec![], None)
    );
    let (lines, end) = phases.step(&row("commit", "tunnel", 6), at(1234));
    assert_eq!(
        lines,
        ["commit      1.23 s  tunnel active; nats drains (at most 30.0 s left)"]
    );
    assert_eq!(end, None);
    let mut settled = row("stable", "tunnel", 7);
    settled.last_change = Some(ChangeRecord {
        to: "tunnel".into(),
        outcome: Some("settled".into()),
        prepare_ms: Some(1210.4),
        drain_ms: Some(52.0),
        ..ChangeRecord::default()
    });
    let (lines, end) = phases.step(&settled, at(1500));
    assert_eq!(
        lines,
        [
            "stable      1.50 s  settled on tunnel (epoch 7); request → commit 1.21 s, commit → settled 0.05 s"
        ]
    );
    assert_eq!(end, Some(End::Settled));
}

#[test]
fn a_poll_that_misses_phases_still_draws_them_in_order() {
    let mut phases = Phases::new("tunnel", BTreeMap::new(), 5);
    let (lines, end) = phases.step(&row("stable", "tunnel", 7), Duration::from_millis(400));
    assert_eq!(
        lines,
        [
            "prepare     0.40 s  passed",
            "commit      0.40 s  passed",
            "stable      0.40 s  settled on tunnel (epoch 7)"
        ]
    );
    assert_eq!(end, Some(End::Settled));
}

#[test]
fn a_change_back_to_stable_without_its_target_is_an_abort() {
    let mut phases = Phases::new("tunnel", BTreeMap::new(), 5);
    phases.step(&row("prepare", "nats", 5), Duration::ZERO);
    let mut aborted = row("stable", "nats", 6);
    aborted.last_change = Some(ChangeRecord {
        to: "tunnel".into(),
        outcome: Some("aborted".into()),
        reason: Some("the prepare timed out: replica r1 has not built `tunnel`".into()),
        ..ChangeRecord::default()
    });
    let (lines, end) = phases.step(&aborted, Duration::from_secs(60));
    assert_eq!(
        lines,
        [
            "aborted    60.00 s  back to stable on nats (epoch 6) without reaching tunnel: the prepare timed out: replica r1 has not built `tunnel`"
        ]
    );
    assert_eq!(end, Some(End::Aborted));

    // A version upgrade keeps the set: one move after the prepare is
    // an abort though the set is the target; the versions asked for
    // must run once settled.
    let upgrade = || Phases::new("nats", [("nats".into(), "0.2.0".into())].into(), 5);
    assert_eq!(
        upgrade().step(&row("stable", "nats", 6), Duration::ZERO).1,
        Some(End::Aborted)
    );
    assert_eq!(
        upgrade().step(&row("stable", "nats", 7), Duration::ZERO).1,
        Some(End::Settled)
    );
    let mut older = row("stable", "nats", 7);
    older.plugins.get_mut("nats").unwrap().version = "0.1.0".into();
    assert_eq!(upgrade().step(&older, Duration::ZERO).1, Some(End::Aborted));
}

#[test]
fn a_blocked_answer_lists_its_blockers() {
    let body = serde_json::to_value(Blocked {
        error: switchyard_protocol::admin::ErrorDetail {
            code: "blocked".into(),
            message: "the change is blocked".into(),
        },
        blockers: vec![Blocker {
            code: "replica_cannot_build".into(),
            message: "r1: no NATS URL".into(),
        }],
        report: CarrierStatus::default(),
    })
    .unwrap();
    let text = format!("{:#}", refusal(StatusCode::UNPROCESSABLE_ENTITY, body));
    assert!(text.contains("422 Unprocessable Entity blocked"), "{text}");
    assert!(
        text.contains("blocker replica_cannot_build: r1: no NATS URL"),
        "{text}"
    );
    let conflict = json!({"error": {"code": "change_under_way", "message": "epoch 4"}});
    let text = format!("{:#}", refusal(StatusCode::CONFLICT, conflict));
    assert_eq!(text, "409 Conflict change_under_way: epoch 4");
}
