//! The carrier rules, table by table, and a link following news with
//! components kept in its cache.

use std::collections::BTreeSet;

use sha2::Digest;
use switchyard_protocol::carrier::ComponentRef;
use switchyard_protocol::state::CarrierRowState;

use super::lanes::DialError;
use super::*;
use crate::engines::EngineBinaries;
use crate::node::EngineStartPolicy;
use crate::placement::Placement;

#[test]
fn only_a_409_to_the_bulk_lane_is_an_expected_race() {
    assert!(DialError::Answered(409).is_expected_on_bulk());
    for other in [401, 503] {
        assert!(!DialError::Answered(other).is_expected_on_bulk());
    }
    assert!(!DialError::Other("connection refused".into()).is_expected_on_bulk());
}

fn component(name: &str, version: &str, bytes: &[u8]) -> ComponentRef {
    ComponentRef {
        name: name.into(),
        version: version.into(),
        sha256: hex::encode(sha2::Sha256::digest(bytes)),
    }
}

fn set(carrier: &str, components: Vec<ComponentRef>) -> SetRef {
    SetRef {
        carrier: carrier.into(),
        components,
    }
}

fn news(epoch: i64, state: CarrierRowState, active: SetRef) -> CarrierNews {
    CarrierNews {
        carrier: active.carrier,
        epoch,
        state,
        components: active.components,
        target: None,
        draining: None,
        nats_url: None,
        attach_jitter_ms: Some(0),
        max_drain_ms: None,
    }
}

fn roles(news: &CarrierNews) -> Vec<(String, Role)> {
    desired(news)
        .into_iter()
        .map(|(key, _, role)| (key.carrier, role))
        .collect()
}

#[test]
fn the_news_names_the_sets_to_run_in_every_phase() {
    let nats = set("nats", vec![component("nats", "0.1.0", b"nats-1")]);
    let tunnel = set("tunnel", vec![component("tunnel", "0.2.0", b"tunnel-2")]);
    let mut n = news(1, CarrierRowState::Stable, nats.clone());
    assert_eq!(roles(&n), [("nats".into(), Role::Active)]);
    // Prepare: the target beside the active set.
    n.state = CarrierRowState::Prepare;
    n.target = Some(tunnel.clone());
    assert_eq!(
        roles(&n),
        [
            ("nats".into(), Role::Active),
            ("tunnel".into(), Role::Target)
        ]
    );
    // Commit: the new set is active, the old one drains.
    let mut committed = news(3, CarrierRowState::Commit, tunnel.clone());
    committed.draining = Some(nats.clone());
    assert_eq!(
        roles(&committed),
        [
            ("tunnel".into(), Role::Active),
            ("nats".into(), Role::Draining)
        ]
    );
    // A version upgrade: the same set twice, two keys.
    let mut upgrade = news(4, CarrierRowState::Prepare, nats.clone());
    upgrade.target = Some(set("nats", vec![component("nats", "0.2.0", b"nats-2")]));
    let keys: Vec<SetKey> = desired(&upgrade).into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(keys.len(), 2);
    assert_ne!(keys[0], keys[1]);
    // The same set named twice runs once, as the active set.
    let mut same = news(5, CarrierRowState::Prepare, nats.clone());
    same.target = Some(nats);
    assert_eq!(roles(&same), [("nats".into(), Role::Active)]);
}

#[test]
fn attaching_backs_off_from_one_to_thirty_seconds_and_jitter_stays_in_bounds() {
    let waits: Vec<u64> = (1..=8).map(|n| attach_backoff(n).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
    assert_eq!(attach_backoff(u32::MAX), MAX_ATTACH_BACKOFF);
    assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
    let max = Duration::from_millis(50);
    for _ in 0..1000 {
        assert!(jitter(max) <= max);
    }
    // Spread, not one value.
    let seen: BTreeSet<Duration> = (0..200).map(|_| jitter(Duration::from_secs(10))).collect();
    assert!(seen.len() > 100, "{}", seen.len());
}

#[test]
fn cannot_follow_names_every_set_of_the_catalog_with_why() {
    let none = BTreeMap::new();
    assert_eq!(
        cannot_follow(None, Some("nats://n:4222"), &none),
        [("nats".to_string(), NO_ADDRESS.to_string())].into()
    );
    assert_eq!(
        cannot_follow(Some("10.0.0.5:7000"), None, &none),
        [("nats".to_string(), NO_NATS_URL.to_string())].into()
    );
    assert_eq!(
        cannot_follow(Some("10.0.0.5:7000"), Some("nats://n:4222"), &none),
        BTreeMap::new()
    );
    let fetch: BTreeMap<String, String> = [(
        "tunnel".to_string(),
        "tunnel@0.3.0: refused: digest".to_string(),
    )]
    .into();
    assert_eq!(
        cannot_follow(None, None, &fetch),
        [
            ("nats".to_string(), NO_ADDRESS.to_string()),
            (
                "tunnel".to_string(),
                "tunnel@0.3.0: refused: digest".to_string()
            ),
        ]
        .into()
    );
}

#[test]
fn a_released_set_closes_when_idle_with_the_active_set_connected_or_after_the_drain() {
    let drain = Duration::from_secs(120);
    let early = Duration::from_secs(1);
    assert!(may_close(early, true, 0, drain));
    // Work still runs on it, or the new set is not connected yet: kept.
    assert!(!may_close(early, true, 1, drain));
    assert!(!may_close(early, false, 0, drain));
    // Past the drain, whatever runs.
    assert!(may_close(drain, false, 3, drain));
    assert!(may_close(early, false, 3, Duration::ZERO));
}

/// A link with components kept in its cache (so nothing is fetched)
/// and a frontend nobody answers at (lanes are dialled in vain).
struct Fixture {
    link: CarrierLink,
    identity: Identity,
    _dir: tempfile::TempDir,
}

fn fixture(kept: &[&[u8]], address: Option<&str>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let components = dir.path().join("components");
    std::fs::create_dir_all(&components).unwrap();
    for bytes in kept {
        let sha = hex::encode(sha2::Sha256::digest(bytes));
        std::fs::write(components.join(format!("{sha}.wasm")), bytes).unwrap();
    }
    let node = Node::new(
        Placement::open(&dir.path().join("models"), 0).unwrap(),
        EngineBinaries::default(),
        EngineStartPolicy::default(),
    );
    let runtime = Runtime::new(switchyard_runtime::RuntimeConfig::for_carriers(None)).unwrap();
    let link = CarrierLink::new(
        runtime,
        ComponentCache::new(dir.path()),
        None,
        address.map(str::to_string),
        None,
        node,
    );
    Fixture {
        link,
        identity: Identity {
            node_id: "node_test".into(),
            credential: "credential".into(),
            frontend: "http://127.0.0.1:1".into(),
        },
        _dir: dir,
    }
}

fn running(link: &CarrierLink) -> Vec<String> {
    link.running
        .keys()
        .map(|k| {
            format!(
                "{}:{}",
                k.carrier,
                &k.pins.values().next().unwrap().sha256[..6]
            )
        })
        .collect()
}

fn short(c: &SetRef) -> String {
    format!("{}:{}", c.carrier, &c.components[0].sha256[..6])
}

/// Says `key`'s set is connected (or not) from now on.
fn connected(link: &mut CarrierLink, key: &SetKey, connected: bool) {
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(connected));
    link.running.get_mut(key).unwrap().probe = Some(Probe::Flag(flag));
    link.publish(None);
}

#[tokio::test]
async fn a_tunnel_upgrade_attaches_beside_an_abort_lets_go_a_settle_drains() {
    let (old, new) = (b"tunnel-0.2.0".as_slice(), b"tunnel-0.3.0".as_slice());
    let mut f = fixture(&[old, new], None);
    let a = set("tunnel", vec![component("tunnel", "0.2.0", old)]);
    let b = set("tunnel", vec![component("tunnel", "0.3.0", new)]);
    let (key_a, key_b) = (SetKey::of(&a), SetKey::of(&b));

    let stable = news(1, CarrierRowState::Stable, a.clone());
    f.link.follow(&stable, &f.identity).await;
    assert_eq!(running(&f.link), [short(&a)]);
    let report = f.link.status().attachment();
    // Not connected (nobody answers the lanes): not attached, and the
    // news not yet acted on.
    assert!(report.attached.is_empty());
    assert_eq!(report.epoch_seen, None);
    assert_eq!(
        report.cannot_follow,
        [("nats".to_string(), NO_ADDRESS.to_string())].into()
    );
    connected(&mut f.link, &key_a, true);
    f.link.follow(&stable, &f.identity).await;
    assert_eq!(f.link.status().attachment().epoch_seen, Some(1));

    // Prepare: the new version runs beside the old one, and it dials.
    let mut prepare = stable.clone();
    prepare.epoch = 2;
    prepare.state = CarrierRowState::Prepare;
    prepare.target = Some(b.clone());
    f.link.follow(&prepare, &f.identity).await;
    let mut both = vec![short(&a), short(&b)];
    both.sort();
    let mut now = running(&f.link);
    now.sort();
    assert_eq!(now, both);
    assert_eq!(f.link.dialling.as_ref().map(|(k, _)| k), Some(&key_b));
    // Two versions of one set share the lanes: the old one's session
    // (still up) is the name connected.
    assert_eq!(f.link.status().attachment().epoch_seen, Some(2));
    connected(&mut f.link, &key_b, true);
    // The new version took the lanes over: the old one's are lost.
    connected(&mut f.link, &key_a, false);
    f.link.follow(&prepare, &f.identity).await;
    let report = f.link.status().attachment();
    assert_eq!(
        (report.attached, report.epoch_seen),
        (vec!["tunnel".to_string()], Some(2))
    );

    // Abort: the old version dials again at once; the target (which
    // took over the lanes) is let go once the old one is connected and
    // nothing runs on the target.
    let mut aborted = stable.clone();
    aborted.epoch = 3;
    aborted.max_drain_ms = Some(600_000);
    let work = f.link.running[&key_b].in_flight.enter();
    f.link.follow(&aborted, &f.identity).await;
    assert_eq!(f.link.dialling.as_ref().map(|(k, _)| k), Some(&key_a));
    assert_eq!(
        f.link.running.len(),
        2,
        "the old version is not connected yet"
    );
    connected(&mut f.link, &key_a, true);
    f.link.follow(&aborted, &f.identity).await;
    assert_eq!(f.link.running.len(), 2, "a stream still runs on the target");
    drop(work);
    f.link.follow(&aborted, &f.identity).await;
    assert_eq!(running(&f.link), [short(&a)]);

    // Prepare again, commit, settle: the old version is kept while the
    // new one is not connected, and closes once it is and nothing runs
    // on the old one.
    f.link.follow(&prepare, &f.identity).await;
    let mut commit = news(5, CarrierRowState::Commit, b.clone());
    commit.draining = Some(a.clone());
    f.link.follow(&commit, &f.identity).await;
    assert_eq!(f.link.running.len(), 2);
    let mut settled = news(6, CarrierRowState::Stable, b.clone());
    settled.max_drain_ms = Some(600_000);
    let wake = f.link.follow(&settled, &f.identity).await;
    assert_eq!(f.link.running.len(), 2, "the old set drains");
    assert!(wake.is_some_and(|at| at <= Instant::now() + DRAIN_POLL));
    connected(&mut f.link, &key_b, true);
    f.link.follow(&settled, &f.identity).await;
    assert_eq!(running(&f.link), [short(&b)]);
    assert_eq!(f.link.status().attachment().epoch_seen, Some(6));
}

#[tokio::test]
async fn a_released_set_with_work_running_is_kept_until_its_drain_is_up() {
    let bytes = b"tunnel-0.2.0".as_slice();
    let mut f = fixture(&[bytes], None);
    let a = set("tunnel", vec![component("tunnel", "0.2.0", bytes)]);
    f.link
        .follow(&news(1, CarrierRowState::Stable, a.clone()), &f.identity)
        .await;
    // The cluster moved on to a set this worker cannot attach to (no
    // components at all): the old one is all it has, and a stream runs on it.
    let work = f.link.running[&SetKey::of(&a)].in_flight.enter();
    let mut settled = news(2, CarrierRowState::Stable, set("tunnel", Vec::new()));
    settled.max_drain_ms = Some(600_000);
    f.link.follow(&settled, &f.identity).await;
    assert!(f.link.running.contains_key(&SetKey::of(&a)));
    f.link.follow(&settled, &f.identity).await;
    assert!(f.link.running.contains_key(&SetKey::of(&a)));
    // Past the drain it closes, work or not.
    settled.max_drain_ms = Some(0);
    f.link.follow(&settled, &f.identity).await;
    assert!(f.link.running.is_empty());
    drop(work);
}

#[tokio::test]
async fn a_target_waits_for_its_jitter_and_nats_without_an_address_is_not_attached() {
    let bytes = b"tunnel-0.2.0".as_slice();
    let mut f = fixture(&[bytes], None);
    let a = set("tunnel", vec![component("tunnel", "0.2.0", bytes)]);
    let nats = set("nats", vec![component("nats", "0.1.0", b"nats")]);
    let stable = news(1, CarrierRowState::Stable, a.clone());
    f.link.follow(&stable, &f.identity).await;
    connected(&mut f.link, &SetKey::of(&a), true);
    f.link.follow(&stable, &f.identity).await;
    let mut prepare = news(2, CarrierRowState::Prepare, a.clone());
    prepare.target = Some(nats.clone());
    prepare.nats_url = Some("nats://127.0.0.1:1".into());
    prepare.attach_jitter_ms = Some(600_000);
    let before = Instant::now();
    let wake = f.link.follow(&prepare, &f.identity).await.unwrap();
    // Not tried yet: the news is not acted on.
    assert!(wake <= before + Duration::from_secs(600) && wake >= before);
    assert!(f.link.pending.contains_key(&SetKey::of(&nats)));
    assert_eq!(f.link.status().attachment().epoch_seen, Some(1));

    // With no jitter it is tried at once, and fails for want of an
    // address, to be tried again after a second.
    prepare.epoch = 3;
    prepare.attach_jitter_ms = Some(0);
    f.link.pending.clear();
    let before = Instant::now();
    let wake = f.link.follow(&prepare, &f.identity).await.unwrap();
    assert!(wake >= before + FIRST_ATTACH_BACKOFF);
    let pending = &f.link.pending[&SetKey::of(&nats)];
    assert_eq!(pending.failures, 1);
    let report = f.link.status().attachment();
    assert_eq!(report.epoch_seen, Some(3));
    assert_eq!(report.cannot_follow["nats"], NO_ADDRESS);
    assert_eq!(running(&f.link), [short(&a)]);
}

#[tokio::test]
async fn the_workers_own_nats_url_wins_and_a_component_that_cannot_be_fetched_is_reported() {
    let mut f = fixture(&[], Some("127.0.0.1:0"));
    let nats = set("nats", vec![component("nats", "0.1.0", b"nats")]);
    let mut n = news(1, CarrierRowState::Stable, nats);
    f.link.follow(&n, &f.identity).await;
    // No URL anywhere.
    assert_eq!(
        f.link.status().attachment().cannot_follow["nats"],
        NO_NATS_URL
    );
    n.nats_url = Some("nats://cluster:4222".into());
    assert_eq!(f.link.effective_nats_url(), None);
    f.link.pending.clear();
    f.link.follow(&n, &f.identity).await;
    assert_eq!(
        f.link.effective_nats_url().as_deref(),
        Some("nats://cluster:4222")
    );
    // The component is neither kept nor fetchable (nobody answers).
    let report = f.link.status().attachment();
    assert!(
        report.cannot_follow["nats"].starts_with("nats@0.1.0:"),
        "{:?}",
        report.cannot_follow
    );
    f.link.nats_url = Some("nats://own:4222".into());
    assert_eq!(
        f.link.effective_nats_url().as_deref(),
        Some("nats://own:4222")
    );
}
