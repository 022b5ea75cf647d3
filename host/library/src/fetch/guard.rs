//! Which addresses a fetch may reach. A URL given by an API caller is
//! fetched by the server, from inside its network: without a check, a
//! caller could make the server read its own loopback services, a cloud
//! metadata endpoint (169.254.169.254) or any private host, and learn from
//! the errors what is there (server-side request forgery).
//!
//! The check is made on the addresses a host name resolves to, in the DNS
//! resolver the HTTP client connects with (so the address checked is the
//! address connected to: no window for DNS rebinding), on IP literals
//! before any connection, and again on every redirect. An operator names
//! the internal hosts a fetch may reach (`--fetch-allow-host HOST[:PORT]`);
//! that is what trusted fetchers do too (Grafana's and GitLab's outbound
//! request filters refuse local and private networks unless an admin lists
//! the host).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::Host;

/// Hosts an operator allowed a fetch to reach whatever they resolve to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    /// Lowercase host (IPv6 without brackets) and, when given, the only port.
    entries: Vec<(String, Option<u16>)>,
}

/// An allow-list entry that is not `HOST` or `HOST:PORT`.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not HOST or HOST:PORT (an IPv6 address in brackets: [::1]:8080)")]
pub struct BadEntry(String);

impl AllowList {
    /// Parses entries `HOST`, `HOST:PORT`, `[IPv6]` or `[IPv6]:PORT`.
    pub fn parse<I, S>(entries: I) -> Result<Self, BadEntry>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let entries = entries
            .into_iter()
            .map(|entry| parse_entry(entry.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(Self { entries })
    }

    /// Whether no host is allowed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the list names `host` at all (with any port).
    fn names(&self, host: &str) -> bool {
        self.entries.iter().any(|(h, _)| h == host)
    }

    /// Whether the list allows `host` on `port`.
    fn allows(&self, host: &str, port: Option<u16>) -> bool {
        self.entries
            .iter()
            .any(|(h, p)| h == host && (p.is_none() || *p == port))
    }
}

fn parse_entry(raw: &str) -> Result<(String, Option<u16>), BadEntry> {
    let bad = || BadEntry(raw.to_string());
    let raw_trimmed = raw.trim();
    let (host, port) = if let Some(rest) = raw_trimmed.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        host.parse::<Ipv6Addr>().map_err(|_| bad())?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or_else(bad)?),
        };
        (host, port)
    } else {
        match raw_trimmed.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (raw_trimmed, None),
        }
    };
    let port = port
        .map(|p| p.parse::<u16>().map_err(|_| bad()))
        .transpose()?;
    if host.is_empty() || host.contains(['/', '@', ' ', '[', ']']) {
        return Err(bad());
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// A fetch refused because its host is, or resolves to, an address the
/// server does not fetch from.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "{host} is, or resolves to, a loopback, private, link-local or otherwise non-public address"
)]
pub struct NotAllowed {
    /// The host as named in the URL.
    pub host: String,
}

/// A URL's host as the allow-list spells it, and its port.
fn host_and_port(url: &Url) -> Option<(String, Option<u16>)> {
    let host = match url.host()? {
        Host::Domain(d) => d.to_ascii_lowercase(),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => ip.to_string(),
    };
    Some((host, url.port_or_known_default()))
}

/// Checks a URL before it is requested (the first one and each redirect):
/// IP literals are checked here, host names when they resolve
/// ([`GuardedResolver`]). A host the allow-list names with a port is
/// allowed on that port only.
pub fn check_url(url: &Url, allow: &AllowList) -> Result<(), NotAllowed> {
    let Some((host, port)) = host_and_port(url) else {
        return Err(NotAllowed {
            host: String::new(),
        });
    };
    if allow.allows(&host, port) {
        return Ok(());
    }
    let refused = || Err(NotAllowed { host: host.clone() });
    if allow.names(&host) {
        return refused();
    }
    match url.host() {
        Some(Host::Ipv4(ip)) if !is_public(IpAddr::V4(ip)) => refused(),
        Some(Host::Ipv6(ip)) if !is_public(IpAddr::V6(ip)) => refused(),
        _ => Ok(()),
    }
}

/// Resolves host names and keeps only public addresses, unless the
/// allow-list names the host.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    allow: Arc<AllowList>,
}

impl GuardedResolver {
    /// A resolver that applies `allow`.
    pub fn new(allow: AllowList) -> Self {
        Self {
            allow: Arc::new(allow),
        }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow.clone();
        Box::pin(async move {
            let host = name.as_str().to_ascii_lowercase();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            // Port checks for allowed hosts were made on the URL ([`check_url`]).
            if allow.names(&host) {
                return Ok(Box::new(found.into_iter()) as Addrs);
            }
            let public: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| is_public(a.ip()))
                .collect();
            if public.is_empty() && !found.is_empty() {
                tracing::warn!(host = %host, addresses = ?found, "a fetch was refused: the host resolves to no public address");
                return Err(Box::new(NotAllowed { host }) as _);
            }
            // A name with public and private addresses connects to the
            // public ones only.
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// Whether an address is one a fetch may reach without an allow-list entry:
/// not loopback, private, link-local, unique-local, unspecified, multicast,
/// broadcast, shared (CGNAT), reserved or documentation space, and not an
/// IPv6 form that embeds such an IPv4 address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = a == 0 // 0.0.0.0/8: "this network", the unspecified address
        || a == 10 // 10/8 private
        || a == 127 // loopback
        || (a == 100 && (b & 0xc0) == 64) // 100.64/10 shared address space (CGNAT)
        || (a == 169 && b == 254) // link-local, cloud metadata
        || (a == 172 && (b & 0xf0) == 16) // 172.16/12 private
        || (a == 192 && b == 0 && c == 0) // 192.0.0/24 IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // TEST-NET-1
        || (a == 192 && b == 168) // 192.168/16 private
        || (a == 198 && (b & 0xfe) == 18) // 198.18/15 benchmarking
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3
        || a >= 224; // multicast, 240/4 reserved, broadcast
    !refused
}

fn public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return public_v4(v4);
    }
    let s = ip.segments();
    let embedded =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) reach an IPv4 address.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        return public_v4(embedded(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return public_v4(embedded(s[1], s[2]));
    }
    let refused = s[0..6] == [0; 6] // ::/96: unspecified, loopback, IPv4-compatible
        || (s[0] & 0xfe00) == 0xfc00 // fc00::/7 unique local
        || (s[0] & 0xffc0) == 0xfe80 // fe80::/10 link-local
        || (s[0] & 0xffc0) == 0xfec0 // fec0::/10 site-local (deprecated)
        || (s[0] & 0xff00) == 0xff00 // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x3fff && s[1] < 0x1000) // 3fff::/20 documentation
        || (s[0] == 0x0100 && s[1..4] == [0; 3]) // 100::/64 discard-only
        || (s[0] == 0x2001 && s[1] < 0x0200); // 2001::/23 IETF protocol (Teredo among them)
    !refused
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(s: &str) -> bool {
        is_public(s.parse().unwrap())
    }

    #[test]
    fn non_public_addresses_are_refused_in_both_families() {
        for refused in [
            "127.0.0.1",
            "127.255.0.9",
            "0.0.0.0",
            "0.1.2.3",
            "10.1.2.3",
            "100.64.0.1",
            "100.127.255.254",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::127.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "3fff::1",
            "100::1",
            "2001::1",
        ] {
            assert!(!public(refused), "{refused} was allowed");
        }
        for allowed in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.0.1",
            "172.32.0.1",
            "192.0.3.1",
            "198.20.0.1",
            "223.255.255.254",
            "2606:4700:4700::1111",
            "2a00:1450::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::",
        ] {
            assert!(public(allowed), "{allowed} was refused");
        }
    }

    #[test]
    fn literals_are_checked_and_the_allow_list_wins_on_its_port_only() {
        let url = |s: &str| Url::parse(s).unwrap();
        let none = AllowList::default();
        for refused in [
            "http://127.0.0.1:8080/m",
            "http://[::1]/m",
            "http://[::ffff:7f00:1]/m",
            "http://0x7f.1/m",
            "http://169.254.169.254/latest/meta-data",
            "http://10.0.0.1/m",
        ] {
            assert!(check_url(&url(refused), &none).is_err(), "{refused}");
        }
        // Names are checked when they resolve, not here.
        assert!(check_url(&url("https://hub.example/m"), &none).is_ok());
        assert!(check_url(&url("https://8.8.8.8/m"), &none).is_ok());

        let allow = AllowList::parse(["127.0.0.1:8080", "[::1]", "Mirror.Internal"]).unwrap();
        assert!(check_url(&url("http://127.0.0.1:8080/m"), &allow).is_ok());
        assert!(check_url(&url("http://127.0.0.1:22/m"), &allow).is_err());
        assert!(check_url(&url("http://[::1]:9/m"), &allow).is_ok());
        assert!(check_url(&url("http://mirror.internal:81/m"), &allow).is_ok());
    }

    #[test]
    fn allow_list_entries_parse_or_say_why_not() {
        let list = AllowList::parse(["a.example", "b.example:8443", "[fd00::1]:80", "[::1]"]);
        assert_eq!(
            list.unwrap().entries,
            vec![
                ("a.example".into(), None),
                ("b.example".into(), Some(8443)),
                ("fd00::1".into(), Some(80)),
                ("::1".into(), None),
            ]
        );
        for bad in ["", "a:b", "a:99999", "[::1", "[nope]", "::1", "http://a/"] {
            assert!(AllowList::parse([bad]).is_err(), "{bad} parsed");
        }
    }

    #[tokio::test]
    async fn the_resolver_drops_non_public_addresses_unless_the_host_is_allowed() {
        let refused = GuardedResolver::new(AllowList::default())
            .resolve("localhost".parse().unwrap())
            .await;
        let error = refused.err().expect("localhost was resolved");
        assert!(error.downcast_ref::<NotAllowed>().is_some(), "{error}");
        let allowed = GuardedResolver::new(AllowList::parse(["localhost"]).unwrap())
            .resolve("localhost".parse().unwrap())
            .await
            .expect("an allowed host resolves");
        assert!(allowed.into_iter().all(|a| a.ip().is_loopback()));
    }
}
