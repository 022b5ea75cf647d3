//! The pgbus notification text (`plugins/pgbus/src/notification.rs`): what
//! every frontend hears on the shared `pg_notify` channel, where anyone with
//! access to the database can also speak.
//!
//! Invariants: no panic; an inline message that decodes encodes to a text
//! of the length `inline_len` predicts, which decodes to it again; a spill
//! marker that decodes encodes to a marker that decodes to the same notice;
//! a headers field that decodes encodes back to itself.

#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_plugin_pgbus::notification::{
    Envelope, Notice, decode, decode_headers, encode_headers, marker,
};

fuzz_target!(|data: &[u8]| {
    // PostgreSQL hands notifications over as text in the server encoding,
    // which the host reads as UTF-8: anything else never reaches the decoder.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match decode(text) {
        Ok(Notice::Inline(message)) => {
            let envelope = Envelope::new(
                &message.subject,
                message.reply_to.as_deref(),
                &message.headers,
            );
            let again = envelope.inline(&message.payload);
            assert_eq!(envelope.inline_len(message.payload.len()), again.len());
            // Not always the same text: the base64 decoder also takes
            // concatenated padded blocks (`aak=YXBw`), a harmless leniency.
            assert_eq!(decode(&again), Ok(Notice::Inline(message)));
        }
        Ok(notice @ Notice::Spilled { .. }) => {
            let Notice::Spilled { id, message } = &notice else {
                unreachable!()
            };
            assert!(*id > 0);
            assert!(message.payload.is_empty());
            let envelope = Envelope::new(
                &message.subject,
                message.reply_to.as_deref(),
                &message.headers,
            );
            let again = marker(*id, &envelope.marker_tail());
            assert!(again.len() <= envelope.marker_len());
            assert_eq!(decode(&again), Ok(notice.clone()));
        }
        Err(_) => {}
    }
    if let Ok(headers) = decode_headers(text) {
        assert_eq!(encode_headers(&headers), text);
    }
});
