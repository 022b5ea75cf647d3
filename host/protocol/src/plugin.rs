//! What a plugin is, and how an admission chain binds a policy: parsed
//! from the admin API's bodies, carried through the server, kept as text by
//! the store (the `plugins.kind` column, each stored chain's JSON).

text_enum! {
    /// The plugin kinds; each has one world the host serves.
    pub enum PluginKind {
        /// An admission policy (`switchyard:policy/admission-policy`).
        Policy => "policy",
        /// A grant evaluator (`switchyard:grant/grant-evaluator`).
        Grant => "grant",
        /// A carrier (`switchyard:carrier/carrier`).
        Carrier => "carrier",
        /// The tunnel carrier's stream multiplexer (`switchyard:carrier/tunnel`).
        Tunnel => "tunnel",
    }
}

impl PluginKind {
    /// The kind in a sentence: "is a carrier plugin, not an admission policy".
    pub fn with_article(self) -> &'static str {
        match self {
            PluginKind::Policy => "an admission policy",
            PluginKind::Grant => "a grant evaluator",
            PluginKind::Carrier => "a carrier",
            PluginKind::Tunnel => "a tunnel",
        }
    }
}

text_enum! {
    /// Whether a policy's answer is enforced or only recorded.
    #[derive(Default)]
    pub enum Mode {
        /// The answer counts (the default).
        #[default]
        Enforce => "enforce",
        /// The answer is logged and counted, never enforced.
        Monitor => "monitor",
    }
}

text_enum! {
    /// What an error in a policy means for the request.
    #[derive(Default)]
    pub enum FailMode {
        /// An error denies (the default).
        #[default]
        Closed => "closed",
        /// An error lets the request through.
        Open => "open",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round_trip;

    #[test]
    fn a_binding_without_modes_is_enforced_and_fails_closed() {
        // The words of `plugins.kind`'s CHECK and of the chains already stored.
        let kinds: Vec<&str> = PluginKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(kinds, ["policy", "grant", "carrier", "tunnel"]);
        assert_eq!(
            round_trip(&(Mode::Monitor, FailMode::Open)),
            serde_json::json!(["monitor", "open"])
        );
        assert_eq!(
            (Mode::default(), FailMode::default()),
            (Mode::Enforce, FailMode::Closed)
        );
        assert!("loud".parse::<Mode>().is_err());
    }
}
