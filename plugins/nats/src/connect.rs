//! The CONNECT line: client options and credentials, as JSON.

use serde::Serialize;

use crate::auth::{ConnectAuth, Credentials};
use crate::error::Error;
use crate::info::ServerInfo;

/// The `lang` this client reports.
pub const LANG: &str = "rust";
/// The `version` this client reports: the crate's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Serialize)]
struct Connect<'a> {
    // Quiet mode: no +OK after every operation.
    verbose: bool,
    pedantic: bool,
    tls_required: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    lang: &'a str,
    version: &'a str,
    // 1: the server may send INFO updates (cluster URLs, lame duck mode).
    protocol: u8,
    echo: bool,
    headers: bool,
    no_responders: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pass: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    auth_token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jwt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nkey: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sig: Option<String>,
}

/// What of the configuration goes into CONNECT besides credentials.
pub(crate) struct ClientOptions<'a> {
    pub name: Option<&'a str>,
    pub echo: bool,
    pub tls: bool,
}

/// Appends `CONNECT {...}\r\n`.
pub(crate) fn write_connect(
    out: &mut Vec<u8>,
    options: &ClientOptions<'_>,
    credentials: &Credentials,
    info: &ServerInfo,
) -> Result<(), Error> {
    let ConnectAuth {
        user,
        pass,
        auth_token,
        nkey,
        sig,
        jwt,
    } = credentials.connect_fields(info.nonce.as_deref())?;
    let connect = Connect {
        verbose: false,
        pedantic: false,
        tls_required: options.tls,
        name: options.name,
        lang: LANG,
        version: VERSION,
        protocol: 1,
        echo: options.echo,
        headers: true,
        // A server without header support refuses no_responders in CONNECT
        // ("No Responders Requires Headers Support"), so ask only when it can.
        no_responders: info.headers,
        user,
        pass,
        auth_token,
        jwt,
        nkey,
        sig,
    };
    out.extend_from_slice(b"CONNECT ");
    // Strings and booleans into a Vec do not fail to serialise; the error is
    // mapped rather than unwrapped so that no path can panic.
    serde_json::to_writer(&mut *out, &connect)
        .map_err(|e| Error::Protocol(format!("cannot encode CONNECT: {e}")))?;
    out.extend_from_slice(b"\r\n");
    Ok(())
}
