//! The carrier component's configuration document (JSON), as an operator
//! writes it for the `nats` carrier.

use serde::Deserialize;

use crate::{Auth, Config, Error, SubjectPolicy};

/// `{"servers": ["127.0.0.1:4222"], "user": .., "password": .., "token": ..,
/// "nkey_seed": .., "creds": .., "roots": ["jobs", "cache"], "name": ..}`
#[derive(Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ComponentConfig {
    /// `host:port` of each server, tried in turn.
    pub servers: Vec<String>,
    /// User and password authentication.
    pub user: Option<String>,
    /// The password of `user`.
    pub password: Option<String>,
    /// Token authentication.
    pub token: Option<String>,
    /// NKey authentication: the user seed (`SU...`).
    pub nkey_seed: Option<String>,
    /// JWT authentication: the text of a `.creds` file.
    pub creds: Option<String>,
    /// Subject roots the carrier may use (`jobs`, `cache`, ...); empty allows any.
    #[serde(default)]
    pub roots: Vec<String>,
    /// The client name servers show.
    pub name: Option<String>,
}

impl std::fmt::Debug for ComponentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Credentials never reach a log.
        f.debug_struct("ComponentConfig")
            .field("servers", &self.servers)
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

impl ComponentConfig {
    /// Parses and checks the document.
    pub fn parse(json: &str) -> Result<Self, String> {
        let config: Self = serde_json::from_str(json)
            .map_err(|e| format!("invalid nats carrier configuration: {e}"))?;
        if config.servers.is_empty() {
            return Err("servers must name at least one host:port".into());
        }
        if let Some(bad) = config
            .servers
            .iter()
            .find(|s| !s.contains(':') || s.contains("://"))
        {
            return Err(format!("servers are host:port, got '{bad}'"));
        }
        Ok(config)
    }

    /// The engine's configuration.
    pub fn engine_config(&self, seed: u64) -> Result<Config, Error> {
        let auth = match (&self.user, &self.token, &self.nkey_seed, &self.creds) {
            (Some(user), None, None, None) => Auth::UserPassword {
                user: user.clone(),
                password: self.password.clone().unwrap_or_default(),
            },
            (None, Some(token), None, None) => Auth::Token(token.clone()),
            (None, None, Some(seed), None) => Auth::NKey { seed: seed.clone() },
            (None, None, None, Some(creds)) => Auth::from_creds(creds)?,
            (None, None, None, None) => Auth::None,
            _ => {
                return Err(Error::InvalidAuth(
                    "give one of user/password, token, nkey_seed or creds".into(),
                ));
            }
        };
        let subject_policy = if self.roots.is_empty() {
            SubjectPolicy::allow_all()
        } else {
            let mut roots = self.roots.clone();
            // Replies to requests come back on the engine's inbox.
            roots.push("_INBOX".into());
            SubjectPolicy::with_roots(roots)?
        };
        Ok(Config {
            name: self.name.clone().or_else(|| Some("switchyard".into())),
            auth,
            subject_policy,
            seed,
            ..Config::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_are_required_and_credentials_are_not_printed() {
        assert!(ComponentConfig::parse(r#"{"servers": []}"#).is_err());
        assert!(ComponentConfig::parse(r#"{"servers": ["nats://h:4222"]}"#).is_err());
        let config = ComponentConfig::parse(
            r#"{"servers": ["h:4222"], "user": "u", "password": "hunter2"}"#,
        )
        .unwrap();
        assert!(!format!("{config:?}").contains("hunter2"));
        assert!(matches!(
            config.engine_config(1).unwrap().auth,
            Auth::UserPassword { .. }
        ));
        let both = ComponentConfig::parse(r#"{"servers": ["h:4222"], "user": "u", "token": "t"}"#)
            .unwrap();
        assert!(both.engine_config(1).is_err());
    }
}
