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

/// A registered plugin version, as the registry shows it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PluginRecord {
    /// Plugin name.
    pub name: String,
    /// Version, as uploaded.
    pub version: String,
    /// What it is.
    pub kind: PluginKind,
    /// The world and version it targets.
    pub world: String,
    /// SHA-256 of the bytes, hex.
    pub sha256: String,
    /// Size in bytes.
    pub size: i64,
    /// The key that uploaded it.
    pub uploaded_by: String,
    /// When, RFC 3339 by the database clock.
    pub uploaded_at: String,
    /// Who signed it; `None`: unsigned.
    pub signature: Option<crate::signing::Signer>,
}

/// `GET /api/plugins`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Plugins {
    /// Every version of every plugin.
    pub plugins: Vec<PluginRecord>,
}

/// `GET /api/plugins/{name}`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PluginVersions {
    /// The plugin's name.
    pub name: String,
    /// Its versions.
    pub versions: Vec<PluginRecord>,
}
