//! Model files fetched by URL into the library. The server downloads (the
//! CLI only asks), over http or https, within a size limit and timeouts;
//! the body is hashed as it streams into a temporary file, and only bytes
//! whose SHA-256 is the declared one are kept ([`Library::put`]).
//!
//! URLs are shown without their credentials or query (a signed URL's query
//! is a secret) in errors and logs.
//!
//! Only public addresses are fetched from, unless an operator allows the
//! host ([`guard`]); and the errors say no more than a caller needs, so
//! that a fetch is no probe of what answers where: why a source could not
//! be reached goes to the log, not to the caller.

pub mod guard;

use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
/// A URL as fetches take it.
pub use reqwest::Url;

pub use guard::{AllowList, NotAllowed};

use crate::{Library, LibraryError, Stored};

/// The largest file fetched: above the biggest single GGUF files published
/// (about 50 GB for one shard on the common hubs) with room to spare, and
/// well short of filling a frontend's disk by mistake.
pub const MAX_FETCH_BYTES: u64 = 256 << 30;
/// Time to open the connection (DNS, TCP, TLS).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Time until the answer's status and headers arrive.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest silence while the body streams; a slow but moving download of
/// many gigabytes is fine, a stalled one is not.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Redirects followed (model hubs redirect to a CDN once or twice).
const MAX_REDIRECTS: usize = 5;

/// The client a fetch connects with: every address it connects to was
/// checked ([`guard`]), the first URL's and each redirect's.
fn client(allow: &AllowList, limits: Limits) -> reqwest::Result<reqwest::Client> {
    let hops = allow.clone();
    let redirects = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error("too many redirects");
        }
        match guard::check_url(attempt.url(), &hops) {
            Ok(()) => attempt.follow(),
            Err(refused) => attempt.error(refused),
        }
    });
    reqwest::Client::builder()
        .connect_timeout(limits.connect)
        .read_timeout(limits.stall)
        .redirect(redirects)
        .dns_resolver(std::sync::Arc::new(guard::GuardedResolver::new(
            allow.clone(),
        )))
        // A proxy would connect to the target for us, past the address
        // checks; the server fetches directly.
        .no_proxy()
        .build()
}

/// How much a fetch may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the file.
    pub max_bytes: u64,
    /// See [`CONNECT_TIMEOUT`].
    pub connect: Duration,
    /// See [`ANSWER_TIMEOUT`].
    pub answer: Duration,
    /// See [`STALL_TIMEOUT`].
    pub stall: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: MAX_FETCH_BYTES,
            connect: CONNECT_TIMEOUT,
            answer: ANSWER_TIMEOUT,
            stall: STALL_TIMEOUT,
        }
    }
}

/// Why a fetch failed. Nothing is kept in any of these cases.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Not an http or https URL with a host.
    #[error("{0}")]
    InvalidUrl(String),
    /// The URL's host is, or resolves to, an address the server does not
    /// fetch from, directly or through a redirect.
    #[error(
        "{url} is not fetched from: {host} is, or resolves to, a loopback, private, link-local \
         or otherwise non-public address (an operator can allow a host with --fetch-allow-host)"
    )]
    NotAllowed {
        /// The URL, shown safely.
        url: String,
        /// The refused host (the first URL's or a redirect's).
        host: String,
    },
    /// The host could not be reached (DNS, refused, TLS, too many redirects,
    /// no connection in time). The cause is logged, not shown: a caller
    /// learns nothing about which ports answer where.
    #[error("cannot reach {url}")]
    Unreachable {
        /// The URL, shown safely.
        url: String,
    },
    /// No answer, or the body stalled, within the limits.
    #[error("{url} {what}")]
    Timeout {
        /// The URL, shown safely.
        url: String,
        /// What took too long.
        what: String,
    },
    /// The source answered something other than 2xx.
    #[error("{url} answered {status}")]
    Status {
        /// The URL, shown safely.
        url: String,
        /// Its answer's status.
        status: reqwest::StatusCode,
    },
    /// The file is larger than the limit.
    #[error("{url} holds more than {limit} bytes, the most a fetch takes")]
    TooLarge {
        /// The URL, shown safely.
        url: String,
        /// The limit.
        limit: u64,
    },
    /// The body broke off.
    #[error("{url}: the download broke off: {reason}")]
    Interrupted {
        /// The URL, shown safely.
        url: String,
        /// What happened.
        reason: String,
    },
    /// The bytes hash to something else, or the library's disk failed.
    #[error(transparent)]
    Library(#[from] LibraryError),
}

/// A URL as it may be shown: scheme, host, port and path only.
pub fn shown(url: &Url) -> String {
    let mut safe = url.clone();
    let _ = safe.set_username("");
    let _ = safe.set_password(None);
    safe.set_query(None);
    safe.set_fragment(None);
    safe.to_string()
}

/// Parses a URL a fetch accepts: http or https, with a host.
pub fn parse_url(raw: &str) -> Result<Url, FetchError> {
    let url =
        Url::parse(raw.trim()).map_err(|e| FetchError::InvalidUrl(format!("not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(FetchError::InvalidUrl(format!(
            "only http and https URLs are fetched, not {}",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(FetchError::InvalidUrl("the URL names no host".into()));
    }
    Ok(url)
}

/// The last segment of the URL's path: the file name a fetch registers by default.
pub fn file_name(url: &Url) -> Option<String> {
    url.path_segments()?
        .next_back()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A source whose answer's head arrived with a 2xx status.
#[derive(Debug)]
pub struct Source {
    response: reqwest::Response,
    url: String,
    limits: Limits,
}

/// Connects and reads the answer's head: every failure before the first
/// byte of the body is known here, before anything is written.
pub async fn open(url: &Url, allow: &AllowList, limits: Limits) -> Result<Source, FetchError> {
    let shown = shown(url);
    guard::check_url(url, allow).map_err(|refused| {
        tracing::warn!(url = %shown, host = %refused.host, "a fetch was refused: not a public address");
        FetchError::NotAllowed {
            url: shown.clone(),
            host: refused.host,
        }
    })?;
    let client = client(allow, limits).map_err(|e| {
        tracing::error!(error = %e, "no HTTP client for a fetch");
        FetchError::Unreachable { url: shown.clone() }
    })?;
    let sent = tokio::time::timeout(limits.answer, client.get(url.clone()).send()).await;
    let response = match sent {
        Err(_) => {
            return Err(FetchError::Timeout {
                url: shown,
                what: format!("did not answer within {} s", limits.answer.as_secs()),
            });
        }
        Ok(Err(e)) => {
            if let Some(refused) = find_cause::<NotAllowed>(&e) {
                tracing::warn!(url = %shown, host = %refused.host, "a fetch was refused: not a public address");
                return Err(FetchError::NotAllowed {
                    url: shown,
                    host: refused.host.clone(),
                });
            }
            // A refused port, a connect timeout, a name that does not
            // resolve and a TLS failure all read the same to the caller.
            tracing::warn!(url = %shown, error = %cause(&e), "a fetch source is unreachable");
            if e.is_timeout() && !e.is_connect() {
                return Err(FetchError::Timeout {
                    url: shown,
                    what: "timed out".into(),
                });
            }
            return Err(FetchError::Unreachable { url: shown });
        }
        Ok(Ok(response)) => response,
    };
    if !response.status().is_success() {
        return Err(FetchError::Status {
            url: shown,
            status: response.status(),
        });
    }
    if response
        .content_length()
        .is_some_and(|n| n > limits.max_bytes)
    {
        return Err(FetchError::TooLarge {
            url: shown,
            limit: limits.max_bytes,
        });
    }
    Ok(Source {
        response,
        url: shown,
        limits,
    })
}

/// The first error of type `T` in `e`'s chain of causes.
fn find_cause<T: std::error::Error + 'static>(e: &reqwest::Error) -> Option<&T> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(current) = source {
        if let Some(found) = current.downcast_ref::<T>() {
            return Some(found);
        }
        source = current.source();
    }
    None
}

/// The innermost cause of a reqwest error (its own message names only the URL, in full).
fn cause(e: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = e;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}

impl Source {
    /// The file's size, when the source says it.
    pub fn total(&self) -> Option<u64> {
        self.response.content_length()
    }

    /// Streams the body into the library under `sha256`; `progress` hears
    /// the bytes received so far after each chunk.
    pub async fn into_library(
        self,
        library: &Library,
        sha256: &str,
        mut progress: impl FnMut(u64) + Send,
    ) -> Result<(Stored, u64), FetchError> {
        let Source {
            response,
            url,
            limits,
        } = self;
        // The typed reason the stream stopped; the library sees only "failed".
        let failure: Mutex<Option<FetchError>> = Mutex::new(None);
        let mut received = 0u64;
        let body = Box::pin(response.bytes_stream().map(|chunk| {
            let fail = |e: FetchError| {
                let message = e.to_string();
                *failure.lock().expect("failure lock") = Some(e);
                Err(message)
            };
            match chunk {
                Ok(chunk) => {
                    received += chunk.len() as u64;
                    if received > limits.max_bytes {
                        return fail(FetchError::TooLarge {
                            url: url.clone(),
                            limit: limits.max_bytes,
                        });
                    }
                    progress(received);
                    Ok(chunk)
                }
                Err(e) if e.is_timeout() => fail(FetchError::Timeout {
                    url: url.clone(),
                    what: format!(
                        "sent nothing for {} s; the download was abandoned",
                        limits.stall.as_secs()
                    ),
                }),
                Err(e) => fail(FetchError::Interrupted {
                    url: url.clone(),
                    reason: cause(&e),
                }),
            }
        }));
        let stored = library.put(sha256, body).await;
        match stored {
            Ok(stored) => Ok(stored),
            Err(LibraryError::Upload(reason)) => Err(failure
                .lock()
                .expect("failure lock")
                .take()
                .unwrap_or(FetchError::Interrupted { url, reason })),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests;
