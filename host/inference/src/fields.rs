//! The one pass over a `/v1` body: the fields the frontend reads, taken
//! from the bytes without building a JSON tree, the body checked as
//! strictly as a `serde_json::Value` would check it (every string decoded,
//! so a lone surrogate escape is an error; nesting deeper than 128 is an
//! error). Needs only serde and serde_json: the `v1_body` fuzz target
//! compiles this file as it is and compares it with a `Value`.
//!
//! A value of each shape below is read by [`Read`]; a value of any other
//! JSON type is worth the shape's default and is still read to its end
//! and checked. Duplicate keys: the last one counts, as in a `Value`,
//! which earlier versions of the route read.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

// Named by path so that the file resolves the same where the fuzz target
// compiles this module by its path.
#[cfg(test)]
#[path = "fields/tree.rs"]
pub mod tree;

/// What the frontend reads of a body. Any top-level value but an object
/// has none of these.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Fields {
    /// `model`, when a string.
    pub model: Option<String>,
    /// `max_tokens`.
    pub max_tokens: Given<u64>,
    /// `max_completion_tokens`.
    pub max_completion_tokens: Given<u64>,
    /// `stream`.
    pub stream: Given<bool>,
    /// Bytes of text in `messages`: each message's `content` string, or the
    /// `text` strings of its parts.
    pub messages: usize,
    /// Bytes of `prompt`, when a string.
    pub prompt: usize,
    /// Bytes of `input`, when a string.
    pub input: usize,
}

/// A field the frontend judges itself, as the body gave it: absent (or
/// `null`, which OpenAI reads as absent), a value of its type, or a value of
/// another type (or a negative count), which is refused before any policy
/// runs rather than dropped and then overwritten by a patch.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Given<T> {
    /// Not in the body, or `null`.
    #[default]
    Absent,
    /// A value of the field's type.
    Is(T),
    /// A value of another type or out of range.
    Wrong,
}

/// Reads a body in one pass.
pub fn read(body: &[u8]) -> Result<Fields, serde_json::Error> {
    serde_json::from_slice::<Read<Fields>>(body).map(|Read(fields)| fields)
}

/// What one JSON value is worth to a shape.
trait Shape<'de>: Default {
    fn string(_text: &str) -> Self {
        Self::default()
    }
    fn unsigned(_value: u64) -> Self {
        Self::default()
    }
    fn negative(_value: i64) -> Self {
        Self::default()
    }
    fn float(_value: f64) -> Self {
        Self::default()
    }
    fn boolean(_value: bool) -> Self {
        Self::default()
    }
    fn null() -> Self {
        Self::default()
    }
    fn seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<Read<Skip>>()?.is_some() {}
        Ok(Self::default())
    }
    fn map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<Read<Skip>, Read<Skip>>()?.is_some() {}
        Ok(Self::default())
    }
}

/// A value read as the shape `T`.
struct Read<T>(T);

impl<'de, T: Shape<'de>> Deserialize<'de> for Read<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Reader(PhantomData)).map(Read)
    }
}

struct Reader<T>(PhantomData<T>);

impl<'de, T: Shape<'de>> Visitor<'de> for Reader<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<T, E> {
        Ok(T::boolean(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        Ok(u64::try_from(v).map_or_else(|_| T::negative(v), T::unsigned))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        Ok(T::unsigned(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        Ok(T::float(v))
    }
    // An escaped string arrives decoded in the parser's scratch buffer:
    // shapes read it there, and only the model's name is copied out.
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        Ok(T::string(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok(T::null())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::map(map)
    }
}

/// Any value, checked and dropped.
#[derive(Default)]
struct Skip;

impl Shape<'_> for Skip {}

/// A key, matched without keeping it.
#[derive(Default, PartialEq, Eq)]
enum Key {
    Model,
    MaxTokens,
    MaxCompletionTokens,
    Stream,
    Messages,
    Prompt,
    Input,
    Content,
    Text,
    #[default]
    Other,
}

impl Shape<'_> for Key {
    fn string(text: &str) -> Self {
        match text {
            "model" => Key::Model,
            "max_tokens" => Key::MaxTokens,
            "max_completion_tokens" => Key::MaxCompletionTokens,
            "stream" => Key::Stream,
            "messages" => Key::Messages,
            "prompt" => Key::Prompt,
            "input" => Key::Input,
            "content" => Key::Content,
            "text" => Key::Text,
            _ => Key::Other,
        }
    }
}

impl<'de> Shape<'de> for Fields {
    fn map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut fields = Fields::default();
        while let Some(Read(key)) = map.next_key::<Read<Key>>()? {
            match key {
                Key::Model => fields.model = map.next_value::<Read<Name>>()?.0.0,
                Key::MaxTokens => fields.max_tokens = map.next_value::<Read<Count>>()?.0.0,
                Key::MaxCompletionTokens => {
                    fields.max_completion_tokens = map.next_value::<Read<Count>>()?.0.0
                }
                Key::Stream => fields.stream = map.next_value::<Read<Flag>>()?.0.0,
                Key::Messages => fields.messages = map.next_value::<Read<Messages>>()?.0.0,
                Key::Prompt => fields.prompt = map.next_value::<Read<Text>>()?.0.0,
                Key::Input => fields.input = map.next_value::<Read<Text>>()?.0.0,
                _ => {
                    map.next_value::<Read<Skip>>()?;
                }
            }
        }
        Ok(fields)
    }
}

/// The model's name: a string, or nothing for another type.
#[derive(Default)]
struct Name(Option<String>);

impl Shape<'_> for Name {
    fn string(text: &str) -> Self {
        Self(Some(text.to_owned()))
    }
}

/// The length in bytes of a string; 0 for another type.
#[derive(Default)]
struct Text(usize);

impl Shape<'_> for Text {
    fn string(text: &str) -> Self {
        Self(text.len())
    }
}

/// A non-negative integer (what `Value::as_u64` reads); any other value
/// but `null` is [`Given::Wrong`].
struct Count(Given<u64>);

impl Default for Count {
    fn default() -> Self {
        Self(Given::Wrong)
    }
}

impl Shape<'_> for Count {
    fn unsigned(value: u64) -> Self {
        Self(Given::Is(value))
    }
    fn null() -> Self {
        Self(Given::Absent)
    }
}

/// A boolean; any other value but `null` is [`Given::Wrong`].
struct Flag(Given<bool>);

impl Default for Flag {
    fn default() -> Self {
        Self(Given::Wrong)
    }
}

impl Shape<'_> for Flag {
    fn boolean(value: bool) -> Self {
        Self(Given::Is(value))
    }
    fn null() -> Self {
        Self(Given::Absent)
    }
}

/// The sum of each list item's length, read as `T`.
fn sum<'de, T: Shape<'de>, A: SeqAccess<'de>>(
    mut seq: A,
    length: fn(T) -> usize,
) -> Result<usize, A::Error> {
    let mut total = 0;
    while let Some(Read(item)) = seq.next_element::<Read<T>>()? {
        total += length(item);
    }
    Ok(total)
}

/// The (last) value under `wanted`, read as `T`; the others are skipped.
fn field<'de, T: Shape<'de>, A: MapAccess<'de>>(mut map: A, wanted: Key) -> Result<T, A::Error> {
    let mut value = T::default();
    while let Some(Read(key)) = map.next_key::<Read<Key>>()? {
        if key == wanted {
            value = map.next_value::<Read<T>>()?.0;
        } else {
            map.next_value::<Read<Skip>>()?;
        }
    }
    Ok(value)
}

/// `messages`: the length of each message's content.
#[derive(Default)]
struct Messages(usize);

impl<'de> Shape<'de> for Messages {
    fn seq<A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error> {
        sum(seq, |Message(n)| n).map(Self)
    }
}

/// One message: the length of its `content`.
#[derive(Default)]
struct Message(usize);

impl<'de> Shape<'de> for Message {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        field(map, Key::Content).map(|Content(n)| Self(n))
    }
}

/// A message's content: a string, or parts whose `text` strings count.
#[derive(Default)]
struct Content(usize);

impl<'de> Shape<'de> for Content {
    fn string(text: &str) -> Self {
        Self(text.len())
    }
    fn seq<A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error> {
        sum(seq, |Part(n)| n).map(Self)
    }
}

/// One content part: the length of its `text`.
#[derive(Default)]
struct Part(usize);

impl<'de> Shape<'de> for Part {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        field(map, Key::Text).map(|Text(n)| Self(n))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_one_pass_reads_what_a_json_tree_reads() {
        let deep = format!("[{}{}]", "[".repeat(200), "]".repeat(200));
        let bodies = [
            r#"{"model": "demo", "messages": [{"role": "user", "content": "hello there"}]}"#,
            r#"{"model": "demo", "max_tokens": 7, "max_completion_tokens": 9, "stream": true}"#,
            r#"{"model": "demo", "max_tokens": "ten", "max_completion_tokens": 9}"#,
            r#"{"model": "demo", "max_tokens": -1, "stream": null}"#,
            r#"{"model": "demo", "max_tokens": 8.0, "stream": "yes"}"#,
            r#"{"model": "demo", "max_tokens": 8.5, "stream": [true]}"#,
            r#"{"model": "demo", "max_tokens": {"n": 1}, "max_completion_tokens": null}"#,
            r#"{"model": "demo", "max_tokens": "ten", "max_tokens": 10, "stream": 1}"#,
            r#"{"model": "demo", "max_tokens": 1e3, "max_completion_tokens": -0}"#,
            r#"{"model": "a", "model": "b", "stream": true, "stream": false}"#,
            r#"{"model": "a", "model": 5}"#,
            r#"{"model": "de\u006do", "max\u005ftokens": 4}"#,
            r#"{"model": "m", "messages": [{"content": [{"type": "text", "text": "abcdefgh"},
                {"type": "image_url", "image_url": {"url": "x"}}, "loose", {"text": 5}]},
                {"content": null}, "not a message", {"content": "x", "content": "longer"}]}"#,
            r#"{"model": "m", "messages": {"content": "no list"}, "prompt": "1234", "input": ["a"]}"#,
            r#"{"model": "m", "prompt": "line\nbreak \u00e9\ud83d\ude00", "input": "abcd"}"#,
            r#"{"model": "m", "tools": [{"function": {"parameters": {"a": [1, 2.5, true]}}}]}"#,
            r#"["model", "demo"]"#,
            r#""demo""#,
            "null",
            r#"{"model": "m", "x": "\ud800"}"#,
            r#"{"model": "m", "x": "\ud83d"}"#,
            r#"{"model": "m", "x": "\q"}"#,
            r#"{"model": "m""#,
            r#"{"model": "m"} trailing"#,
            r#"{"model": "m", "x": 1e999}"#,
            "",
            &deep,
        ];
        for body in bodies {
            super::tree::check(body.as_bytes());
        }
    }
}
