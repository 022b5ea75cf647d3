//! How the worker frames an answer on the inference lane: a head line
//! (status and headers, JSON) and the body, as an engine's answer streams;
//! and the worker's own refusals in that frame.

use bytes::{Bytes, BytesMut};
use switchyard_protocol::openai::OpenAiErrorBody;
use switchyard_protocol::stream::AnswerHead;

/// An answer's head line (without its newline).
fn head_line(head: &AnswerHead) -> String {
    serde_json::to_string(head).expect("a head of strings serializes")
}

/// An answer's head line and its newline, written into `out` (no
/// intermediate string: this runs once per answer).
pub(super) fn head_into(head: &AnswerHead, out: &mut BytesMut) {
    use bytes::BufMut;
    let mut writer = out.writer();
    serde_json::to_writer(&mut writer, head).expect("a head of strings serializes");
    writer.into_inner().put_u8(b'\n');
}

/// A refusal of the worker's own on the inference lane, framed as an
/// engine's answer: the body is OpenAI's error shape with its `type`, since
/// it streams through the frontend to the `/v1` client unchanged.
pub(super) fn error_answer(status: u16, code: &str, message: String) -> Bytes {
    let head = AnswerHead {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
    };
    let body = serde_json::to_string(&OpenAiErrorBody::new(status, code, message))
        .expect("an error body serializes");
    Bytes::from(format!("{}\n{body}", head_line(&head)))
}

#[cfg(test)]
mod error_answer_tests {
    use super::*;

    #[test]
    fn a_refusal_reaches_the_client_with_openai_s_type() {
        let answer = error_answer(503, "replica_unavailable", "no replica r here".into());
        let text = std::str::from_utf8(&answer).unwrap();
        let (head, body) = text.split_once('\n').unwrap();
        assert!(head.contains("503"), "{head}");
        let body: OpenAiErrorBody = serde_json::from_str(body).unwrap();
        assert_eq!(
            (body.error.code.as_str(), body.error.kind.as_str()),
            ("replica_unavailable", "server_error")
        );
    }
}
