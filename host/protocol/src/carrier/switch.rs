//! The carrier switch's own types: a set's identity ([`SetKey`]) and where
//! a change is ([`Phase`]), each with the data that phase carries. The
//! cluster row (`switchyard_store::cluster::ClusterCarrier`) is an active
//! set, an epoch and a phase; the leader's decision reads them
//! (`switchyard_carrier_set::decide`).

use super::{CarrierRowState, ComponentRef, Pins, SetRef, pins, refs};

/// A carrier set and the component versions it runs: what the row names,
/// what a replica reports it built and what a worker attaches to. A new
/// version of a component is another key, run beside the old one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SetKey {
    /// The set's name (`nats`, `tunnel`).
    pub carrier: String,
    /// Its components, pinned (a worker keeps only those it runs).
    pub pins: Pins,
}

impl SetKey {
    /// The key of `carrier` running `pins`.
    pub fn new(carrier: impl Into<String>, pins: Pins) -> Self {
        Self {
            carrier: carrier.into(),
            pins,
        }
    }

    /// The key of a set the news names.
    pub fn of(set: &SetRef) -> Self {
        Self::new(set.carrier.clone(), pins(&set.components))
    }

    /// The label `instances.built` records: the set plus each pin (`nats
    /// nats@0.1.0`), so a version upgrade is another label.
    pub fn label(&self) -> String {
        let mut label = self.carrier.clone();
        for (name, pin) in &self.pins {
            label.push(' ');
            label.push_str(name);
            label.push('@');
            label.push_str(&pin.version);
        }
        label
    }

    /// Its components as references.
    pub fn components(&self) -> Vec<ComponentRef> {
        refs(&self.pins)
    }
}

/// Where a change is, and what it carries there. The row keeps these as
/// parallel columns (`target`, `target_plugins`, `draining`, ...); the
/// store reads them into one value so that a phase without its set cannot
/// be written down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// The active set is the one in use.
    Stable,
    /// Every replica builds `target` beside the active set; workers attach.
    Prepare {
        /// The set the change moves to.
        target: SetKey,
        /// The workers-cannot-follow blockers were overridden.
        forced: bool,
    },
    /// The target is active; `draining` (the old set) drains until the
    /// change settles.
    Commit {
        /// The set the change left.
        draining: SetKey,
    },
}

impl Phase {
    /// The row's `state` text for this phase.
    pub fn state(&self) -> CarrierRowState {
        match self {
            Phase::Stable => CarrierRowState::Stable,
            Phase::Prepare { .. } => CarrierRowState::Prepare,
            Phase::Commit { .. } => CarrierRowState::Commit,
        }
    }

    /// The set a prepare moves to.
    pub fn target(&self) -> Option<&SetKey> {
        match self {
            Phase::Prepare { target, .. } => Some(target),
            _ => None,
        }
    }

    /// The set a commit drains.
    pub fn draining(&self) -> Option<&SetKey> {
        match self {
            Phase::Commit { draining } => Some(draining),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carrier::Pin;

    fn pin(version: &str) -> Pins {
        Pins::from([(
            "nats".to_string(),
            Pin {
                version: version.into(),
                sha256: format!("{version:0>64}"),
            },
        )])
    }

    #[test]
    fn a_version_upgrade_is_another_key_and_another_label() {
        let old = SetKey::new("nats", pin("0.1.0"));
        let new = SetKey::new("nats", pin("0.2.0"));
        assert_ne!(old, new);
        assert_eq!(old.label(), "nats nats@0.1.0");
        assert_eq!(new.label(), "nats nats@0.2.0");
        assert_eq!(SetKey::new("tunnel", Pins::new()).label(), "tunnel");
    }

    #[test]
    fn the_key_of_a_news_set_is_the_key_of_its_pins() {
        let key = SetKey::new("nats", pin("0.1.0"));
        let set = SetRef {
            carrier: "nats".into(),
            components: key.components(),
        };
        assert_eq!(SetKey::of(&set), key);
    }

    #[test]
    fn each_phase_names_its_state_and_only_its_set() {
        let key = SetKey::new("tunnel", Pins::new());
        let prepare = Phase::Prepare {
            target: key.clone(),
            forced: false,
        };
        assert_eq!(prepare.state(), CarrierRowState::Prepare);
        assert_eq!(prepare.target(), Some(&key));
        assert_eq!(prepare.draining(), None);
        let commit = Phase::Commit {
            draining: key.clone(),
        };
        assert_eq!(commit.state(), CarrierRowState::Commit);
        assert_eq!(commit.draining(), Some(&key));
        assert_eq!(Phase::Stable.target(), None);
    }
}
