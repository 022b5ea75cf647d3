//! A batch's output and error files, in OpenAI's format, written from the
//! line rows as they are read: one
//! `{"id","custom_id","response":{"status_code","request_id","body"},"error"}`
//! line per finished line, in input order. An answer's body is stored once
//! (compact JSON, [`json_body`]) and copied into the line as it is.

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use switchyard_store::Store;
use switchyard_store::batches::lines::DoneLine;

/// Lines read per query.
const PAGE: i64 = 256;

/// Which of a batch's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The lines answered with a 2xx.
    Output,
    /// The lines answered otherwise, or never answered.
    Errors,
}

/// The body of an answer as it is stored: the engine's JSON on one line
/// (re-encoded only when it spans lines), or, if it is not JSON, the text
/// as a JSON string.
pub fn json_body(body: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(_) if !body.contains(&b'\n') && !body.contains(&b'\r') => body.to_vec(),
        Ok(value) => serde_json::to_vec(&value).expect("a JSON value serializes"),
        Err(_) => serde_json::to_vec(&String::from_utf8_lossy(body)).expect("a string serializes"),
    }
}

/// One line of the file, with its newline.
pub fn write_line(out: &mut Vec<u8>, batch: &str, line: &DoneLine) {
    let request_id = line.request_id.as_deref();
    let id = match request_id.and_then(|r| r.strip_prefix("req_")) {
        Some(suffix) => format!("batch_req_{suffix}"),
        None => format!(
            "batch_req_{}_{}",
            batch.trim_start_matches("batch_"),
            line.line
        ),
    };
    let text = |s: &str| serde_json::to_string(s).expect("a string serializes");
    out.extend_from_slice(b"{\"id\":");
    out.extend_from_slice(text(&id).as_bytes());
    out.extend_from_slice(b",\"custom_id\":");
    out.extend_from_slice(text(&line.custom_id).as_bytes());
    out.extend_from_slice(b",\"response\":");
    match (line.status_code, &line.response) {
        (Some(status), Some(body)) => {
            out.extend_from_slice(format!("{{\"status_code\":{status},\"request_id\":").as_bytes());
            out.extend_from_slice(text(request_id.unwrap_or_default()).as_bytes());
            out.extend_from_slice(b",\"body\":");
            out.extend_from_slice(body);
            out.push(b'}');
        }
        _ => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"error\":");
    match &line.error {
        Some(error) => out.extend_from_slice(error.to_string().as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b"}\n");
}

/// A page of lines after `after`, written; `None` once there are no more.
async fn page(
    store: &Store,
    batch: &str,
    part: Part,
    after: i32,
) -> Result<Option<(Vec<u8>, i32)>, switchyard_store::StoreError> {
    let lines = store
        .done_lines(batch, part == Part::Errors, after, PAGE)
        .await?;
    let Some(last) = lines.last().map(|l| l.line) else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for line in &lines {
        write_line(&mut out, batch, line);
    }
    Ok(Some((out, last)))
}

/// The file's bytes, a page at a time.
pub fn stream(
    store: Store,
    batch: String,
    part: Part,
) -> BoxStream<'static, Result<Bytes, std::io::Error>> {
    futures::stream::unfold(Some(-1), move |after| {
        let (store, batch) = (store.clone(), batch.clone());
        async move {
            match page(&store, &batch, part, after?).await {
                Ok(Some((bytes, last))) => Some((Ok(Bytes::from(bytes)), Some(last))),
                Ok(None) => None,
                Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
            }
        }
    })
    .boxed()
}

/// The file's size and line count, as [`stream`] will serve it.
pub async fn measure(
    store: &Store,
    batch: &str,
    part: Part,
) -> Result<(i64, i64), switchyard_store::StoreError> {
    let (mut bytes, mut lines, mut after) = (0i64, 0i64, -1);
    while let Some((page_bytes, last)) = page(store, batch, part, after).await? {
        bytes += page_bytes.len() as i64;
        lines += page_bytes.iter().filter(|b| **b == b'\n').count() as i64;
        after = last;
    }
    Ok((bytes, lines))
}

#[cfg(test)]
mod tests {
    use switchyard_protocol::batch::OutputLine;

    use super::*;

    #[test]
    fn a_written_line_is_an_openai_output_line() {
        let body = json_body(b"{\n  \"object\": \"chat.completion\"\n}");
        assert_eq!(body, br#"{"object":"chat.completion"}"#);
        let answered = DoneLine {
            line: 3,
            custom_id: "q\"3".into(),
            status_code: Some(200),
            request_id: Some("req_ab".into()),
            response: Some(body),
            error: None,
        };
        let expired = DoneLine {
            line: 4,
            custom_id: "q4".into(),
            status_code: None,
            request_id: None,
            response: None,
            error: Some(serde_json::json!({"code": "batch_expired", "message": "late"})),
        };
        let mut out = Vec::new();
        write_line(&mut out, "batch_f0", &answered);
        write_line(&mut out, "batch_f0", &expired);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<OutputLine> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0].id, "batch_req_ab");
        assert_eq!(lines[0].custom_id, "q\"3");
        let response = lines[0].response.as_ref().unwrap();
        assert_eq!(
            (response.status_code, response.request_id.as_str()),
            (200, "req_ab")
        );
        assert_eq!(response.body["object"], "chat.completion");
        assert_eq!(lines[1].id, "batch_req_f0_4");
        assert_eq!(lines[1].error.as_ref().unwrap().code, "batch_expired");
        assert!(lines[1].response.is_none());
        assert_eq!(json_body(b"not json"), br#""not json""#);
    }
}
