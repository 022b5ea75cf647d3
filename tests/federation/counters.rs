//! A grant's counters under concurrent charges and releases, straight
//! against the store: no call fails (a charge and a release take the
//! grant's row and the slot's in one order, so they never deadlock), no
//! slot leaks, and only what was charged is counted.

use switchyard_protocol::federation::{Direction, GrantTerms, Operation, Party};
use switchyard_store::Store;
use switchyard_store::federation::{Cost, Insert, NewPeer};
use switchyard_tests::db::fresh_database;

fn party(id: &str) -> Party {
    Party {
        cluster_id: id.into(),
        label: id.into(),
        public_key: format!("{id}-key"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_charges_and_releases_never_fail_or_leak_a_slot() {
    let store = Store::connect(&fresh_database().await).await.unwrap();
    let Insert::Done(peer) = store
        .insert_peer(NewPeer {
            label: "alpha",
            url: None,
            cluster_id: "alpha",
            public_key: "alpha-key",
        })
        .await
        .unwrap()
    else {
        panic!("the peer was not made");
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let terms = GrantTerms {
        id: "grant_counters".into(),
        request: None,
        owner: party("beta"),
        grantee: party("alpha"),
        operations: vec![Operation::Inference],
        services: vec!["chat".into()],
        models: Vec::new(),
        machines: Vec::new(),
        issued_at_unix_ms: 0,
        expires_at_unix_ms: now_ms + 3_600_000,
        max_concurrent: 3,
        max_requests: 1_000_000,
        max_model_bytes: 0,
        stop_on_revoke: false,
    };
    store
        .insert_grant(&peer.id, Direction::Outgoing, &terms, "sig")
        .await
        .unwrap();
    assert!(store.complete_grant(&terms.id, "sig").await.unwrap());

    let cost = Cost {
        requests: 1,
        concurrent: 1,
        ..Cost::default()
    };
    let workers = (0..8).map(|w| {
        let (store, peer) = (store.clone(), peer.id.clone());
        tokio::spawn(async move {
            let instance = format!("inst_{}", w % 2);
            let mut charged = 0u64;
            for _ in 0..60 {
                let outcome = store
                    .charge_grant("grant_counters", &peer, cost, &instance)
                    .await
                    .expect("a charge never fails");
                if outcome.is_ok() {
                    charged += 1;
                    store
                        .release_grant("grant_counters", 1, &instance)
                        .await
                        .expect("a release never fails");
                }
            }
            charged
        })
    });
    let charged: u64 = futures::future::join_all(workers)
        .await
        .into_iter()
        .map(Result::unwrap)
        .sum();
    let (grant, _) = store.grant("grant_counters").await.unwrap().unwrap();
    assert!(charged > 0);
    assert_eq!(grant.usage.in_flight, 0, "a slot leaked");
    assert_eq!(
        grant.usage.requests, charged,
        "only what was charged is counted"
    );
}
