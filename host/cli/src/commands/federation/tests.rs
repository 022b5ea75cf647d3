//! What the federation commands print, and the offers they build.

use clap::Parser;
use switchyard_protocol::federation::{
    Bounds, Direction, GrantStatus, LinkState, LinkStatus, OfferKind,
};

use switchyard_protocol::jobs::JobProjections;

use super::*;
use crate::cli::{Cli, Command};

fn parse(args: &[&str]) -> FederationCommand {
    let cli = Cli::try_parse_from(["switchyard", "federation"].iter().chain(args))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let Command::Federation(command) = cli.command else {
        panic!("not a federation command");
    };
    command
}

fn fails(args: &[&str]) -> bool {
    Cli::try_parse_from(["switchyard", "federation"].iter().chain(args)).is_err()
}

#[test]
fn json_and_server_are_taken_before_or_after_a_subcommand() {
    let FederationCommand::Peers {
        action: Some(PeersAction::Show { peer }),
        out,
    } = parse(&["peers", "show", "east", "--json", "--server", "http://x:1"])
    else {
        panic!("not peers show");
    };
    assert_eq!(peer, "east");
    assert!(out.json);
    assert_eq!(out.api.server, "http://x:1");
    let FederationCommand::Peers { action: None, out } = parse(&["peers", "--json"]) else {
        panic!("not peers");
    };
    assert!(out.json);
}

#[test]
fn publish_names_exactly_one_resource() {
    let FederationCommand::Offers {
        action: Some(OffersAction::Publish(args)),
        ..
    } = parse(&[
        "offers",
        "publish",
        "--service",
        "chat",
        "--deployment",
        "dep_1",
    ])
    else {
        panic!("not publish");
    };
    let offer = new_offer(args).unwrap();
    assert_eq!(offer.id.as_deref(), Some("chat"));
    assert_eq!(
        offer.resource,
        Resource::Service {
            deployment: "dep_1".into()
        }
    );
    let FederationCommand::Offers {
        action: Some(OffersAction::Publish(args)),
        ..
    } = parse(&["offers", "publish", "--runtime", "vllm", "--gpus", "2"])
    else {
        panic!("not publish");
    };
    assert_eq!(new_offer(args).unwrap().resource.kind(), OfferKind::Runtime);
    assert!(fails(&["offers", "publish"]));
    assert!(fails(&[
        "offers",
        "publish",
        "--machine",
        "n",
        "--deployment",
        "d"
    ]));
    assert!(fails(&["offers", "publish", "--model", "m"]));
    let FederationCommand::Offers {
        action: Some(OffersAction::Publish(args)),
        ..
    } = parse(&["offers", "publish", "--machine", "n", "--gpus", "1"])
    else {
        panic!("not publish");
    };
    assert!(new_offer(args).is_err(), "--gpus without --runtime");
}

#[test]
fn the_join_line_names_this_server_and_label() {
    let text = render_token("fjt_abc", "http://10.0.0.5:8080/", "west");
    assert!(text.contains(
        "switchyard federation join --url http://10.0.0.5:8080 --token fjt_abc --label west\n"
    ));
}

#[test]
fn segments_cannot_change_the_path() {
    assert_eq!(segment("east-1"), "east-1");
    assert_eq!(segment("a/../b?x"), "a%2F..%2Fb%3Fx");
}

#[test]
fn status_shows_identity_links_grants_and_bounds() {
    let status = FederationStatus {
        identity: "verified".into(),
        cluster: Identity {
            cluster_id: "c1".into(),
            label: "west".into(),
            public_key: Some("ab".into()),
        },
        suspended: None,
        peers: vec![PeerStatus {
            id: "p1".into(),
            label: "east".into(),
            link: LinkStatus {
                state: LinkState::Down,
                last_error: Some("connection refused".into()),
                since: None,
            },
            identity_verified: false,
            last_verified_at: None,
            grants: vec![GrantStatus {
                id: "g1".into(),
                direction: Direction::Incoming,
                status: switchyard_protocol::federation::GrantStanding::Active,
                requests_left: 0,
                concurrent_left: 4,
                model_bytes_left: 0,
                exhausted: vec!["requests".into()],
                last_verified_at: None,
            }],
            jobs: JobProjections {
                jobs: 3,
                active: 1,
                oldest_sync: Some("2026-12-01T10:00:00Z".into()),
            },
        }],
        bounds: Bounds {
            peers: 1,
            offers: 2,
            grants: 1,
            operations: 7,
        },
        copies: Vec::new(),
    };
    let text = render_status(&status);
    assert!(text.starts_with("identity:    verified\n"), "{text}");
    assert!(
        text.contains("peers 1/128, offers 2/256, grants 1/256, operations 7/2048"),
        "{text}"
    );
    assert!(
        text.contains("east (p1): link down: connection refused; identity not verified"),
        "{text}"
    );
    assert!(
        text.contains(
            "    jobs it owns for this cluster: 3 (1 running, oldest sync 2026-12-01T10:00:00Z)\n"
        ),
        "{text}"
    );
    let grant = text.lines().find(|l| l.contains("g1")).unwrap();
    let cells: Vec<&str> = grant.split_whitespace().collect();
    assert_eq!(
        cells,
        ["g1", "incoming", "active", "0", "4", "0", "requests"]
    );
}
