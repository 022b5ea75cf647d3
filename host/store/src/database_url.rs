//! A database URL, parsed once into what every connection to it needs: the
//! driver's configuration and the TLS that libpq's `ssl*` parameters ask
//! for. Every connection the host opens to PostgreSQL (the pool, LISTEN
//! connections, advisory-lock holders, the carriers' database channels, the
//! bench and the test harness) is made by [`DatabaseUrl::connect`], so that
//! none can forget TLS.
//!
//! The driver (tokio-postgres) knows `sslmode` `disable`, `prefer` and
//! `require` only, and refuses `sslrootcert`, `sslcert` and `sslkey` as
//! unknown options: those four are taken out of the string here, in either
//! form (`postgres://...?sslmode=...` or `key=value ...`), and the rest is
//! left to the driver. A later occurrence overrides an earlier one, as in
//! libpq. What each value means is in [`crate::tls`]'s table.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::StoreError;
use crate::tls::{self, Roots, SslMode, TlsSettings};

/// A connection's driver half: poll it (or spawn it) for the client to work.
pub type Connection =
    tokio_postgres::Connection<Socket, <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream>;

/// A parsed database URL with its TLS connector (certificate files read).
/// Its `Debug` shows neither the password nor any file path.
#[derive(Clone)]
pub struct DatabaseUrl {
    config: tokio_postgres::Config,
    mode: SslMode,
    tls: MakeRustlsConnect,
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseUrl")
            .field("hosts", &self.config.get_hosts())
            .field("ports", &self.config.get_ports())
            .field("dbname", &self.config.get_dbname())
            .field("user", &self.config.get_user())
            .field("sslmode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl FromStr for DatabaseUrl {
    type Err = StoreError;

    fn from_str(url: &str) -> Result<Self, StoreError> {
        Self::parse(url)
    }
}

impl DatabaseUrl {
    /// Parses `url` (a `postgres://` URL or a libpq `key=value` string) and
    /// reads the certificate files it names. Errors name the parameter at
    /// fault, never the password or the key's path.
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        let (rest, ssl) = take_ssl(url)?;
        let mut config = tokio_postgres::Config::from_str(&rest)
            .map_err(|e| StoreError::Config(format!("invalid database URL: {e}")))?;
        let settings = TlsSettings::from_params(ssl)?;
        config.ssl_mode(settings.mode.driver_mode());
        let tls = tls::connector(&settings)?;
        Ok(Self {
            config,
            mode: settings.mode,
            tls,
        })
    }

    /// Sets the time to open a connection, unless the URL set one
    /// (`connect_timeout`).
    pub fn default_connect_timeout(&mut self, timeout: std::time::Duration) {
        if self.config.get_connect_timeout().is_none() {
            self.config.connect_timeout(timeout);
        }
    }

    /// The driver's configuration (for the pool's manager).
    pub(crate) fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// The TLS connector (for the pool's manager).
    pub(crate) fn tls(&self) -> MakeRustlsConnect {
        self.tls.clone()
    }

    /// Opens a connection, with TLS as the URL asks; the caller drives the
    /// [`Connection`].
    pub async fn connect(&self) -> Result<(Client, Connection), StoreError> {
        Ok(self.config.connect(self.tls.clone()).await?)
    }

    /// [`DatabaseUrl::connect`] with the connection driven by a task of its
    /// own until the client is dropped.
    pub async fn connect_spawned(&self) -> Result<Client, StoreError> {
        let (client, connection) = self.connect().await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }
}

/// The `ssl*` parameters as written, taken out of the URL.
#[derive(Default)]
pub(crate) struct SslParams {
    pub(crate) mode: Option<String>,
    pub(crate) rootcert: Option<String>,
    pub(crate) cert: Option<String>,
    pub(crate) key: Option<String>,
}

impl SslParams {
    /// Keeps `value` if `key` is one of ours; `false` if it is the driver's.
    fn take(&mut self, key: &str, value: String) -> bool {
        let slot = match key {
            "sslmode" => &mut self.mode,
            "sslrootcert" => &mut self.rootcert,
            "sslcert" => &mut self.cert,
            "sslkey" => &mut self.key,
            _ => return false,
        };
        *slot = Some(value);
        true
    }
}

impl TlsSettings {
    /// What the written parameters ask for.
    fn from_params(ssl: SslParams) -> Result<Self, StoreError> {
        let roots = match ssl.rootcert.as_deref() {
            None => None,
            Some("system") => Some(Roots::System),
            Some(path) => Some(Roots::File(PathBuf::from(path))),
        };
        let mode = match ssl.mode.as_deref() {
            Some(mode) => mode.parse()?,
            // libpq 16: the system's roots are only worth trusting with the host name checked.
            None if roots == Some(Roots::System) => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        if roots == Some(Roots::System) && mode != SslMode::VerifyFull {
            return Err(StoreError::Config(format!(
                "sslrootcert=system needs sslmode=verify-full, got sslmode={mode}"
            )));
        }
        let client = match (ssl.cert, ssl.key) {
            (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
            (None, None) => None,
            (Some(_), None) => {
                return Err(StoreError::Config(
                    "sslcert is given without sslkey: a client certificate needs its key".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(StoreError::Config(
                    "sslkey is given without sslcert: a client key needs its certificate".into(),
                ));
            }
        };
        Ok(Self {
            mode,
            roots,
            client,
        })
    }
}

/// Splits `url` into the driver's part and our `ssl*` parameters.
pub(crate) fn take_ssl(url: &str) -> Result<(String, SslParams), StoreError> {
    let url = url.trim();
    let mut ssl = SslParams::default();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((head, query)) = url.split_once('?') else {
            return Ok((url.to_string(), ssl));
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let taken = match pair.split_once('=') {
                Some((key, value)) => ssl.take(&decode(key)?, decode(value)?),
                None => false,
            };
            if !taken {
                kept.push(pair);
            }
        }
        let rest = match kept.is_empty() {
            true => head.to_string(),
            false => format!("{head}?{}", kept.join("&")),
        };
        return Ok((rest, ssl));
    }
    let mut kept = Vec::new();
    let mut scanner = Scanner { s: url, at: 0 };
    while let Some(pair) = scanner.pair() {
        match pair {
            Pair::Parsed { key, value, raw } => {
                if !ssl.take(key, value) {
                    kept.push(raw);
                }
            }
            // Not key=value: left for the driver to refuse with its message.
            Pair::Rest(raw) => {
                kept.push(raw);
                break;
            }
        }
    }
    Ok((kept.join(" "), ssl))
}

/// A URL's percent-encoded text, decoded.
fn decode(text: &str) -> Result<String, StoreError> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| StoreError::Config("invalid database URL: a parameter is not UTF-8".into()))
}

/// One `key = value` of a libpq keyword string, as the driver reads it:
/// a value is quoted with `'` or ends at white space, and `\` escapes the
/// next character in both.
enum Pair<'a> {
    Parsed {
        key: &'a str,
        value: String,
        raw: &'a str,
    },
    Rest(&'a str),
}

struct Scanner<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<char> {
        self.s[self.at..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += c.len_utf8();
        Some(c)
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
    }

    fn pair(&mut self) -> Option<Pair<'a>> {
        self.skip_ws();
        let start = self.at;
        if start == self.s.len() {
            return None;
        }
        while self.peek().is_some_and(|c| !c.is_whitespace() && c != '=') {
            self.bump();
        }
        let key = &self.s[start..self.at];
        self.skip_ws();
        if key.is_empty() || self.bump() != Some('=') {
            return Some(Pair::Rest(&self.s[start..]));
        }
        self.skip_ws();
        let mut value = String::new();
        let quoted = self.peek() == Some('\'');
        if quoted {
            self.bump();
        }
        loop {
            match self.peek() {
                None if quoted => return Some(Pair::Rest(&self.s[start..])),
                None => break,
                Some('\'') if quoted => {
                    self.bump();
                    break;
                }
                Some(c) if c.is_whitespace() && !quoted => break,
                Some('\\') => {
                    self.bump();
                    value.extend(self.bump());
                }
                Some(c) => {
                    self.bump();
                    value.push(c);
                }
            }
        }
        Some(Pair::Parsed {
            key,
            value,
            raw: &self.s[start..self.at],
        })
    }
}

#[cfg(test)]
mod tests;
