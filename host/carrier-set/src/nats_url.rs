//! A NATS URL as the cluster settings take it: where it points, the form
//! it is kept in, whether a NATS server answers there, and how it is shown
//! (passwords masked). Errors never repeat a URL: it may hold a credential.

use std::time::Duration;

use switchyard_protocol::carrier::ClusterSettings;
use tokio::io::AsyncBufReadExt;

/// How long a reachability check may take, name lookup, connect and the
/// server's `INFO` line together: an operator waits on it, and a NATS
/// server sends `INFO` at once on accept.
pub const REACH_TIMEOUT: Duration = Duration::from_secs(3);
/// The longest URL taken: a host name is at most 253 characters; this
/// leaves room and stays far from anything a log line must carry.
pub const MAX_URL_LEN: usize = 512;
/// The longest `INFO` line read: a NATS server's is well under 1 KiB
/// (the protocol caps a control line at 4 KiB).
const MAX_INFO_LINE: u64 = 4096;
/// The port a NATS URL without one means (what every NATS client assumes).
const NATS_PORT: u16 = 4222;

/// Where a NATS URL points: `nats://host[:port]`, `tls://host[:port]`, or
/// `host:port` (what `--nats-url` takes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsTarget {
    /// The host (a name or an address).
    pub host: String,
    /// The port (4222 when the URL names none).
    pub port: u16,
    /// `tls://`.
    pub tls: bool,
}

impl std::fmt::Display for NatsTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl NatsTarget {
    /// The host and port of a setting's URL; why not, in words that never
    /// repeat the URL (it may hold a credential).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.len() > MAX_URL_LEN {
            return Err(format!("a URL is at most {MAX_URL_LEN} characters"));
        }
        let with_scheme;
        let text = if text.contains("://") {
            text
        } else {
            with_scheme = format!("nats://{text}");
            &with_scheme
        };
        let url = url::Url::parse(text)
            .map_err(|_| "is not a URL (nats://host:port or tls://host:port)".to_string())?;
        if !matches!(url.scheme(), "nats" | "tls") {
            return Err("the scheme must be nats:// or tls://".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(
                "a URL may not carry credentials; give them to the NATS clients' own configuration"
                    .into(),
            );
        }
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err("a NATS URL is nats://host:port, with no path or query".into());
        }
        let host = match url.host() {
            Some(url::Host::Domain(name)) if !name.is_empty() => name.to_string(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            _ => return Err("the URL names no host".into()),
        };
        Ok(Self {
            host,
            port: url.port().unwrap_or(NATS_PORT),
            tls: url.scheme() == "tls",
        })
    }

    /// The form a setting keeps: `host:port` for a plain server, what the
    /// `nats` set's component dials and what `--nats-url` takes (every
    /// reader of the setting hands it on as it is); `tls://host:port` for
    /// one that wants TLS, which a replica that cannot speak it reports in
    /// its `can_build` rather than dialling in the clear.
    pub fn canonical(&self) -> String {
        match self.tls {
            true => format!("tls://{self}"),
            false => self.to_string(),
        }
    }

    /// Connects and reads the server's `INFO` line, within [`REACH_TIMEOUT`]:
    /// an open port is not enough, what answers must be a NATS server. The
    /// server sends `INFO` in the clear before any TLS (unless it is set to
    /// TLS-first, which a `tls://` client then needs anyway).
    pub async fn reach(&self) -> Result<(), String> {
        let attempt = async {
            let stream = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
                .await
                .map_err(|e| format!("cannot connect ({})", e.kind()))?;
            let mut line = String::new();
            tokio::io::BufReader::new(tokio::io::AsyncReadExt::take(stream, MAX_INFO_LINE))
                .read_line(&mut line)
                .await
                .map_err(|e| format!("connected, then the connection failed ({})", e.kind()))?;
            if line.starts_with("INFO ") || line.starts_with("INFO\t") {
                Ok(())
            } else {
                Err("connected, but what answers is not a NATS server (no INFO line)".into())
            }
        };
        tokio::time::timeout(REACH_TIMEOUT, attempt)
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "no NATS INFO line within {} s",
                    REACH_TIMEOUT.as_secs()
                ))
            })
    }
}

/// The settings as shown: every URL masked.
pub fn masked(mut settings: ClusterSettings) -> ClusterSettings {
    settings.nats_url = settings.nats_url.as_deref().map(mask_url);
    settings.worker_nats_url = settings.worker_nats_url.as_deref().map(mask_url);
    settings
}

/// A URL (or a comma-separated list of them, as NATS clients take) with
/// each password, or a token-only user part, replaced by `***`. Written
/// on the text, not a parser: a URL that does not parse is masked too.
pub fn mask_url(text: &str) -> String {
    text.split(',')
        .map(|one| {
            let (scheme, rest) = match one.find("://") {
                Some(at) => one.split_at(at + 3),
                None => ("", one),
            };
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(end);
            match authority.rsplit_once('@') {
                Some((userinfo, host)) => {
                    let shown = match userinfo.split_once(':') {
                        Some((user, _)) => format!("{user}:***"),
                        None => "***".into(),
                    };
                    format!("{scheme}{shown}@{host}{tail}")
                }
                None => one.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}
