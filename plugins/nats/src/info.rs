//! The server's INFO: what it is, what it allows, and what it wants from us.

use serde::Deserialize;

/// The NATS server's default `max_payload`, used until INFO says otherwise
/// (and when INFO leaves it out).
pub const DEFAULT_MAX_PAYLOAD: usize = 1024 * 1024;

/// The fields of an INFO line this engine reads; the others are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ServerInfo {
    /// The server's unique id.
    pub server_id: String,
    /// The server's configured name, if it has one.
    pub server_name: String,
    /// The server's version, such as `2.10.7`.
    pub version: String,
    /// The largest message (headers and payload together) the server accepts.
    pub max_payload: usize,
    /// Whether the server understands HPUB/HMSG.
    pub headers: bool,
    /// The challenge to sign with an NKey, present when NKey auth is possible.
    pub nonce: Option<String>,
    /// Whether the server refuses clients that do not authenticate.
    pub auth_required: bool,
    /// Whether the server refuses clients that do not speak TLS.
    pub tls_required: bool,
    /// Other servers of the cluster a client may reconnect to.
    pub connect_urls: Vec<String>,
    /// Lame duck mode: the server is about to shut down and asks clients to move.
    pub ldm: bool,
}

impl ServerInfo {
    /// Parses the JSON after `INFO `.
    pub fn parse(json: &[u8]) -> Result<Self, serde_json::Error> {
        let mut info: ServerInfo = serde_json::from_slice(json)?;
        if info.max_payload == 0 {
            info.max_payload = DEFAULT_MAX_PAYLOAD;
        }
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_real_info() {
        let json = br#"{"server_id":"NCXMJZYQEWUDJFLYLSTTE745I2WUNCVG3LJJ3NRKSFJXEG6RGK7753DJ","server_name":"n1","version":"2.10.7","proto":1,"go":"go1.21.5","host":"0.0.0.0","port":4222,"headers":true,"auth_required":true,"max_payload":1048576,"client_id":5,"client_ip":"127.0.0.1","nonce":"lCQmdWJpL9U0Jb8","connect_urls":["10.0.0.1:4222","10.0.0.2:4222"],"ldm":false}"#;
        let info = ServerInfo::parse(json).unwrap();
        assert_eq!(info.server_name, "n1");
        assert_eq!(info.max_payload, 1_048_576);
        assert!(info.headers && info.auth_required && !info.tls_required);
        assert_eq!(info.nonce.as_deref(), Some("lCQmdWJpL9U0Jb8"));
        assert_eq!(info.connect_urls.len(), 2);
    }

    #[test]
    fn defaults_and_errors() {
        let info = ServerInfo::parse(b"{}").unwrap();
        assert_eq!(info.max_payload, DEFAULT_MAX_PAYLOAD);
        assert!(!info.headers);
        assert!(ServerInfo::parse(b"{not json").is_err());
        assert!(ServerInfo::parse(br#"{"max_payload":-1}"#).is_err());
    }
}
