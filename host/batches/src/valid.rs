//! A batch's input file checked line by line into [`ValidLine`]s, and the
//! limits it is held to. A file is checked as it is uploaded (so a bad one
//! is refused at once, with the line that is wrong) and parsed again when a
//! batch is created from it (the stored bytes become rows).

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;
use switchyard_protocol::batch::BATCH_ENDPOINTS;
use switchyard_protocol::limits::MAX_REQUEST_BODY;

use crate::BatchesError;

/// The largest file taken: a batch's lines are stored in the database, and
/// held in memory while a batch is created from them.
pub const MAX_FILE_BYTES: usize = 64 << 20;
/// The longest line: a line is one `/v1` request, so one longer than a
/// request body may be could never be sent.
pub const MAX_LINE: usize = MAX_REQUEST_BODY;
/// Lines in one file, as OpenAI allows.
pub const MAX_LINES: usize = 50_000;
/// Longest `custom_id`, in bytes: a caller's key, not a payload.
pub const MAX_CUSTOM_ID: usize = 512;
/// Longest file name, as most file systems allow.
pub const MAX_FILENAME: usize = 255;
/// Metadata, as OpenAI bounds it: keys, a key's and a value's length.
pub const MAX_METADATA_KEYS: usize = 16;
/// Longest metadata key.
pub const MAX_METADATA_KEY: usize = 64;
/// Longest metadata value.
pub const MAX_METADATA_VALUE: usize = 512;
/// Distinct models one batch may name (each is asked for its capacity at
/// every pass of the driver).
pub const MAX_MODELS: usize = 64;

/// One line, checked.
#[derive(Debug, Clone)]
pub struct ValidLine {
    /// Unique in the file.
    pub custom_id: String,
    /// One of [`BATCH_ENDPOINTS`].
    pub url: String,
    /// The body's `model`.
    pub model: String,
    /// The body, compact JSON.
    pub body: Vec<u8>,
}

/// A line as written, every field optional so that a missing one is named.
#[derive(Deserialize)]
struct RawLine {
    custom_id: Option<serde_json::Value>,
    method: Option<serde_json::Value>,
    url: Option<serde_json::Value>,
    body: Option<serde_json::Value>,
}

fn refuse(code: &'static str, message: String) -> BatchesError {
    BatchesError::invalid(code, message)
}

/// A batch input file checked as it streams in, a piece at a time: JSONL,
/// at most [`MAX_LINES`] lines (blank lines skipped), each
/// `{"custom_id", "method": "POST", "url", "body"}` with a unique
/// `custom_id`, a batch endpoint and a body naming its `model`, and no line
/// longer than [`MAX_LINE`]. The first wrong line is named in the refusal.
/// It holds one line at a time (and the ids seen), never the file.
#[derive(Debug, Default)]
pub struct Lines {
    /// The start of a line whose end has not arrived.
    partial: Vec<u8>,
    /// Lines read so far, blank ones included (for the numbers in refusals).
    read: usize,
    /// Lines that are not blank.
    counted: usize,
    seen: HashSet<String>,
    /// The lines themselves, when kept ([`Lines::keeping`]).
    kept: Option<Vec<ValidLine>>,
}

impl Lines {
    /// A checker that keeps the lines it checked (a batch being created).
    pub fn keeping() -> Self {
        Lines {
            kept: Some(Vec::new()),
            ..Lines::default()
        }
    }

    /// Checks the complete lines `data` ends, keeping the start of the last
    /// one until its end arrives.
    pub fn push(&mut self, mut data: &[u8]) -> Result<(), BatchesError> {
        while let Some(end) = data.iter().position(|b| *b == b'\n') {
            let line = if self.partial.is_empty() {
                self.line(&data[..end])
            } else {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(&data[..end]);
                self.line(&whole)
            };
            line?;
            data = &data[end + 1..];
        }
        if self.partial.len() + data.len() > MAX_LINE {
            return Err(self.too_large(self.read + 1));
        }
        self.partial.extend_from_slice(data);
        Ok(())
    }

    /// Checks the last line (the file may not end with a newline); the
    /// lines, when kept.
    pub fn finish(mut self) -> Result<Vec<ValidLine>, BatchesError> {
        let last = std::mem::take(&mut self.partial);
        self.line(&last)?;
        if self.counted == 0 {
            return Err(refuse("empty_file", "the file has no lines".into()));
        }
        Ok(self.kept.unwrap_or_default())
    }

    fn too_large(&self, n: usize) -> BatchesError {
        refuse(
            "line_too_large",
            format!("line {n} is longer than a request may be ({MAX_LINE} bytes)"),
        )
    }

    fn line(&mut self, raw: &[u8]) -> Result<(), BatchesError> {
        self.read += 1;
        let n = self.read;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        if raw.len() > MAX_LINE {
            return Err(self.too_large(n));
        }
        if self.counted == MAX_LINES {
            return Err(refuse(
                "too_many_lines",
                format!("a batch file has at most {MAX_LINES} lines"),
            ));
        }
        self.counted += 1;
        let line = parse_line(n, raw)?;
        if !self.seen.insert(line.custom_id.clone()) {
            return Err(refuse(
                "duplicate_custom_id",
                format!(
                    "line {n}: custom_id `{:.64}` is used by an earlier line",
                    line.custom_id
                ),
            ));
        }
        if let Some(kept) = &mut self.kept {
            kept.push(line);
        }
        Ok(())
    }
}

/// Parses a whole batch input file into its lines ([`Lines`]).
#[cfg(test)]
pub fn parse(content: &[u8]) -> Result<Vec<ValidLine>, BatchesError> {
    let mut lines = Lines::keeping();
    lines.push(content)?;
    lines.finish()
}

fn parse_line(n: usize, raw: &[u8]) -> Result<ValidLine, BatchesError> {
    let line: RawLine = serde_json::from_slice(raw).map_err(|e| {
        refuse(
            "invalid_jsonl",
            format!("line {n} is not a JSON object: {e}"),
        )
    })?;
    let custom_id = match line.custom_id {
        Some(serde_json::Value::String(id)) => id,
        Some(_) => {
            return Err(refuse(
                "invalid_custom_id",
                format!("line {n}: custom_id must be a string"),
            ));
        }
        None => {
            return Err(refuse(
                "missing_custom_id",
                format!("line {n}: custom_id is missing"),
            ));
        }
    };
    if custom_id.is_empty() || custom_id.len() > MAX_CUSTOM_ID || custom_id.contains('\0') {
        return Err(refuse(
            "invalid_custom_id",
            format!("line {n}: custom_id must be 1 to {MAX_CUSTOM_ID} bytes without NUL"),
        ));
    }
    if line.method.as_ref().and_then(|m| m.as_str()) != Some("POST") {
        return Err(refuse(
            "invalid_method",
            format!("line {n}: method must be POST"),
        ));
    }
    let url = match line.url.as_ref().and_then(|u| u.as_str()) {
        Some(url) if BATCH_ENDPOINTS.contains(&url) => url.to_string(),
        _ => {
            return Err(refuse(
                "invalid_url",
                format!(
                    "line {n}: url must be one of {}",
                    BATCH_ENDPOINTS.join(", ")
                ),
            ));
        }
    };
    let body = match line.body {
        Some(serde_json::Value::Object(body)) => body,
        _ => {
            return Err(refuse(
                "invalid_body",
                format!("line {n}: body must be a JSON object"),
            ));
        }
    };
    let model = match body.get("model").and_then(|m| m.as_str()) {
        Some(model) if !model.is_empty() => model.to_string(),
        _ => {
            return Err(refuse(
                "invalid_body",
                format!("line {n}: body.model must be a model's name"),
            ));
        }
    };
    // A batch's answers are stored whole; a stream has no place in a file.
    if body.get("stream").and_then(|s| s.as_bool()) == Some(true) {
        return Err(refuse(
            "invalid_body",
            format!("line {n}: a batch line cannot stream"),
        ));
    }
    let body = serde_json::to_vec(&body).expect("a JSON object serializes");
    Ok(ValidLine {
        custom_id,
        url,
        model,
        body,
    })
}

/// Checks a batch's metadata against OpenAI's bounds.
pub fn metadata(metadata: &Option<BTreeMap<String, String>>) -> Result<(), BatchesError> {
    let Some(metadata) = metadata else {
        return Ok(());
    };
    let too_long = metadata
        .iter()
        .any(|(k, v)| k.len() > MAX_METADATA_KEY || v.len() > MAX_METADATA_VALUE);
    let nul = metadata
        .iter()
        .any(|(k, v)| k.contains('\0') || v.contains('\0'));
    if metadata.len() > MAX_METADATA_KEYS || too_long || nul {
        return Err(refuse(
            "invalid_metadata",
            format!(
                "metadata has at most {MAX_METADATA_KEYS} keys of at most {MAX_METADATA_KEY} \
                 characters, values of at most {MAX_METADATA_VALUE}, without NUL"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal's code and message (every refusal here is a 400).
    fn invalid(e: BatchesError) -> (&'static str, String) {
        match e {
            BatchesError::Invalid { code, message } => (code, message),
            other => panic!("not a refusal: {other:?}"),
        }
    }

    fn code(content: &str) -> (&'static str, String) {
        invalid(parse(content.as_bytes()).unwrap_err())
    }

    const GOOD: &str = r#"{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "demo", "messages": []}}"#;

    #[test]
    fn a_good_file_parses_into_lines_with_their_models() {
        let content = format!("{GOOD}\r\n\n{}\n", GOOD.replace("\"a\"", "\"b\""));
        let lines = parse(content.as_bytes()).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            (lines[1].custom_id.as_str(), lines[1].model.as_str()),
            ("b", "demo")
        );
        let body: serde_json::Value = serde_json::from_slice(&lines[0].body).unwrap();
        assert_eq!(body["model"], "demo");
    }

    #[test]
    fn each_bad_line_is_refused_with_its_code_and_number() {
        let cases = [
            ("not json".to_string(), "invalid_jsonl"),
            (
                GOOD.replace(r#""custom_id": "a", "#, ""),
                "missing_custom_id",
            ),
            (format!("{GOOD}\n{GOOD}"), "duplicate_custom_id"),
            (GOOD.replace("POST", "GET"), "invalid_method"),
            (
                GOOD.replace("/v1/chat/completions", "/v1/models"),
                "invalid_url",
            ),
            (GOOD.replace(r#""model": "demo", "#, ""), "invalid_body"),
            (
                GOOD.replace(r#""messages": []"#, r#""stream": true"#),
                "invalid_body",
            ),
            (GOOD.replace(r#""a""#, "5"), "invalid_custom_id"),
            ("\n \n".to_string(), "empty_file"),
        ];
        for (content, expected) in cases {
            assert_eq!(code(&content).0, expected, "{content}");
        }
        assert!(code(&format!("{GOOD}\n{GOOD}")).1.starts_with("line 2:"));
        let many: String = (0..=MAX_LINES)
            .map(|i| GOOD.replace("\"a\"", &format!("\"{i}\"")) + "\n")
            .collect();
        assert_eq!(code(&many).0, "too_many_lines");
    }

    #[test]
    fn a_file_pushed_in_pieces_is_checked_as_the_whole_file_is() {
        let content = format!("{GOOD}\r\n\n{}\n", GOOD.replace("\"a\"", "\"b\""));
        for piece in [1, 7, 64, content.len()] {
            let mut lines = Lines::keeping();
            for part in content.as_bytes().chunks(piece) {
                lines.push(part).unwrap();
            }
            let lines = lines.finish().unwrap();
            assert_eq!(lines.len(), 2, "pieces of {piece}");
            assert_eq!(lines[1].custom_id, "b");
        }
        let mut checked = Lines::default();
        checked.push(content.as_bytes()).unwrap();
        assert!(checked.finish().unwrap().is_empty(), "nothing kept");
    }

    #[test]
    fn a_line_longer_than_a_request_is_refused_before_its_end_arrives() {
        let mut lines = Lines::default();
        lines.push(format!("{GOOD}\n").as_bytes()).unwrap();
        let long = vec![b'x'; MAX_LINE / 2 + 1];
        lines.push(&long).unwrap();
        let (code_of, message) = invalid(lines.push(&long).unwrap_err());
        assert_eq!(code_of, "line_too_large");
        assert!(message.starts_with("line 2 "), "{message}");
        // A whole file with such a line, its end included.
        let file = format!("{GOOD}\n{}\n", "y".repeat(MAX_LINE + 1));
        assert_eq!(code(&file).0, "line_too_large");
    }

    #[test]
    fn metadata_is_bounded_as_openai_bounds_it() {
        let map = |n: usize, len: usize| {
            Some(
                (0..n)
                    .map(|i| (format!("k{i}"), "v".repeat(len)))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        assert!(metadata(&None).is_ok());
        assert!(metadata(&map(16, 512)).is_ok());
        assert_eq!(
            invalid(metadata(&map(17, 1)).unwrap_err()).0,
            "invalid_metadata"
        );
        assert_eq!(
            invalid(metadata(&map(1, 513)).unwrap_err()).0,
            "invalid_metadata"
        );
    }
}
