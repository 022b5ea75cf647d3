//! NATS/1.0 header blocks (`parse_headers`, what an HMSG carries) and the
//! INFO document (`ServerInfo::parse`), straight from bytes.
//!
//! Invariants: no panic; a block that parses, written out again in the
//! canonical form, parses to the same headers; an INFO that parses never has
//! a max_payload of 0.

#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_plugin_nats::{HEADER_VERSION, Headers, ServerInfo, parse_headers};

/// The canonical text of `headers`: a version line with the status and
/// description, `Name: value` lines and the empty line.
fn write(headers: &Headers) -> Vec<u8> {
    let mut out = HEADER_VERSION.as_bytes().to_vec();
    if let Some(status) = headers.status {
        out.extend_from_slice(format!(" {status:03}").as_bytes());
        if let Some(description) = &headers.description {
            out.push(b' ');
            out.extend_from_slice(description.as_bytes());
        }
    } else {
        assert_eq!(headers.description, None, "a description needs a status");
    }
    out.extend_from_slice(b"\r\n");
    for (name, value) in &headers.entries {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

fuzz_target!(|data: &[u8]| {
    if let Ok(headers) = parse_headers(data) {
        let again = parse_headers(&write(&headers));
        assert_eq!(
            again.as_ref(),
            Ok(&headers),
            "{:?}",
            String::from_utf8_lossy(data)
        );
        for (name, value) in &headers.entries {
            assert!(headers.get(name).is_some());
            assert_eq!(value.trim(), value);
        }
    }
    if let Ok(info) = ServerInfo::parse(data) {
        assert_ne!(info.max_payload, 0);
    }
});
