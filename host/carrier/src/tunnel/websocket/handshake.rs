//! The websocket opening handshake (RFC 6455 4) for [`super::wire`]: a
//! worker's dial, and an accept on a bare TCP connection for tests and
//! benchmarks (the frontend's endpoint upgrades through its HTTP server
//! with [`accept_key`] and [`is_upgrade`]).

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::http::Uri;

/// The most a handshake's head may take.
const MAX_HEAD: usize = 16 * 1024;
/// The most header lines a handshake's head may have.
const MAX_HEADERS: usize = 64;

/// Why a dial failed.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// The server answered without upgrading.
    #[error("the server answered {0} instead of upgrading")]
    Answered(u16),
    #[error("{0}")]
    Failed(String),
}

/// The `Sec-WebSocket-Accept` value answering a request's key.
pub fn accept_key(key: &[u8]) -> String {
    derive_accept_key(key)
}

/// Whether a request's `Connection`, `Upgrade` and
/// `Sec-WebSocket-Version` headers ask for a websocket, given each
/// header's value (`None` when missing).
pub fn is_upgrade(
    connection: Option<&[u8]>,
    upgrade: Option<&[u8]>,
    version: Option<&[u8]>,
) -> bool {
    let has_token = |value: Option<&[u8]>, token: &str| {
        value
            .and_then(|v| std::str::from_utf8(v).ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    };
    has_token(connection, "upgrade") && has_token(upgrade, "websocket") && version == Some(b"13")
}

/// Dials `url` (`ws://host[:port]/path`) with `headers` beside the
/// handshake's own; answers the connection and the bytes read past the
/// server's answer (the first frames, when they came with it).
pub async fn dial(url: &str, headers: &[(&str, &str)]) -> Result<(TcpStream, BytesMut), DialError> {
    let failed = |e: &dyn std::fmt::Display| DialError::Failed(e.to_string());
    let uri: Uri = url.parse().map_err(|e| failed(&e))?;
    if uri.scheme_str() != Some("ws") {
        return Err(DialError::Failed(format!(
            "{url}: only ws:// addresses can be dialled"
        )));
    }
    let (Some(authority), Some(host)) = (uri.authority(), uri.host()) else {
        return Err(DialError::Failed(format!("{url}: no host")));
    };
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let key = generate_key();
    let mut request = format!(
        "GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: Upgrade\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n"
    );
    for (name, value) in headers {
        if [name, value]
            .iter()
            .any(|s| s.bytes().any(|b| b == b'\r' || b == b'\n'))
        {
            return Err(DialError::Failed(format!(
                "the header {name} is not a single line"
            )));
        }
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let mut socket = TcpStream::connect((host, uri.port_u16().unwrap_or(80)))
        .await
        .map_err(|e| failed(&e))?;
    let _ = socket.set_nodelay(true);
    socket
        .write_all(request.as_bytes())
        .await
        .map_err(|e| failed(&e))?;
    let (head, rest) = read_head(&mut socket).await.map_err(DialError::Failed)?;
    let mut lines = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut answer = httparse::Response::new(&mut lines);
    answer.parse(&head).map_err(|e| failed(&e))?;
    let status = answer.code.unwrap_or_default();
    if status != 101 {
        return Err(DialError::Answered(status));
    }
    let header = |name: &str| header(answer.headers, name);
    let expected = accept_key(key.as_bytes());
    if header("sec-websocket-accept") != Some(expected.as_bytes()) {
        return Err(DialError::Failed(
            "the server's Sec-WebSocket-Accept does not answer the key".into(),
        ));
    }
    if !is_upgrade(header("connection"), header("upgrade"), Some(b"13")) {
        return Err(DialError::Failed(
            "the server did not upgrade to a websocket".into(),
        ));
    }
    Ok((socket, rest))
}

/// Answers a websocket handshake on `socket`; answers the bytes read past
/// the request (the client's first frames, when they came with it).
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(socket: &mut S) -> Result<BytesMut, String> {
    let (head, rest) = read_head(socket).await?;
    let mut lines = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut lines);
    request.parse(&head).map_err(|e| e.to_string())?;
    let header = |name: &str| header(request.headers, name);
    let upgrade = request.method == Some("GET")
        && is_upgrade(
            header("connection"),
            header("upgrade"),
            header("sec-websocket-version"),
        );
    let Some(key) = header("sec-websocket-key").filter(|_| upgrade) else {
        let _ = socket
            .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            .await;
        return Err("not a websocket handshake".into());
    };
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Accept: {}\r\n\r\n",
        accept_key(key)
    );
    socket
        .write_all(answer.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    Ok(rest)
}

/// A header's value, by name in any case.
fn header<'h>(headers: &[httparse::Header<'h>], name: &str) -> Option<&'h [u8]> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value)
}

/// Reads up to the blank line that ends an HTTP head; answers the head and
/// what was read past it.
async fn read_head<S: AsyncRead + Unpin>(socket: &mut S) -> Result<(BytesMut, BytesMut), String> {
    let mut buffer = BytesMut::with_capacity(1024);
    // Where the blank line may begin: each read's bytes are searched once.
    let mut searched = 0;
    loop {
        if let Some(end) = buffer[searched..].windows(4).position(|w| w == b"\r\n\r\n") {
            let head = buffer.split_to(searched + end + 4);
            return Ok((head, buffer));
        }
        searched = buffer.len().saturating_sub(3);
        if buffer.len() > MAX_HEAD {
            return Err(format!("a handshake head over {MAX_HEAD} bytes"));
        }
        let read = socket
            .read_buf(&mut buffer)
            .await
            .map_err(|e| e.to_string())?;
        if read == 0 {
            return Err("the connection closed during the handshake".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_key_is_the_rfc_example() {
        // RFC 6455 1.3.
        assert_eq!(
            accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn an_upgrade_needs_all_three_headers_tokens_in_any_case() {
        assert!(is_upgrade(
            Some(b"keep-alive, Upgrade"),
            Some(b"WebSocket"),
            Some(b"13")
        ));
        assert!(!is_upgrade(None, Some(b"websocket"), Some(b"13")));
        assert!(!is_upgrade(Some(b"upgrade"), Some(b"h2c"), Some(b"13")));
        assert!(!is_upgrade(
            Some(b"upgrade"),
            Some(b"websocket"),
            Some(b"8")
        ));
    }
}
