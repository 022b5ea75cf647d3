//! The reference the one pass is held to, by the unit tests and by the
//! `v1_body` fuzz target: the fields as read from a `serde_json::Value`,
//! the way the route read them before it parsed into a type.

use serde_json::Value;

use super::{Fields, Given, read};

/// A field as the one pass judges it: `null` or missing is absent, a value
/// `read` takes is given, anything else is wrong.
fn given<T>(value: &Value, read: impl Fn(&Value) -> Option<T>) -> Given<T> {
    match value {
        Value::Null => Given::Absent,
        value => read(value).map_or(Given::Wrong, Given::Is),
    }
}

/// The fields of a body already parsed into a tree.
pub fn from_tree(body: &Value) -> Fields {
    let text = |value: &Value| value.as_str().map_or(0, str::len);
    let messages = body["messages"].as_array().map_or(0, |messages| {
        messages
            .iter()
            .map(|message| match &message["content"] {
                Value::String(content) => content.len(),
                Value::Array(parts) => parts.iter().map(|part| text(&part["text"])).sum(),
                _ => 0,
            })
            .sum()
    });
    Fields {
        model: body["model"].as_str().map(String::from),
        max_tokens: given(&body["max_tokens"], Value::as_u64),
        max_completion_tokens: given(&body["max_completion_tokens"], Value::as_u64),
        stream: given(&body["stream"], Value::as_bool),
        messages,
        prompt: text(&body["prompt"]),
        input: text(&body["input"]),
    }
}

/// Reads `body` both ways: the one pass accepts exactly the bodies a
/// `Value` accepts, refuses the others with the same error, and reads the
/// same fields.
pub fn check(body: &[u8]) {
    match (read(body), serde_json::from_slice::<Value>(body)) {
        (Ok(fields), Ok(tree)) => assert_eq!(fields, from_tree(&tree)),
        (Err(pass), Err(tree)) => assert_eq!(pass.to_string(), tree.to_string()),
        (pass, tree) => panic!("the one pass read {pass:?}, a tree {tree:?}"),
    }
}
