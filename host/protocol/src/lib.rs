//! Every message that crosses a process boundary, defined once: what a
//! worker registers and heartbeats with and what the frontend answers, the
//! heads of the `inference` and `blob` streams, each control verb's request
//! and answer, the admin request bodies the CLI sends and the server parses,
//! the limits both sides hold to, and the states stored as text.
//!
//! Both sides build and read these types, so a change to a message is a
//! compile error on each side instead of a `json!` on one and a
//! `v["a"]["b"]` lookup on the other that drift apart. Each type has a
//! round-trip test beside it.
//!
//! # Layout
//! - [`node`]: registration and heartbeat, and the inventory they carry.
//! - [`engines`]: the engine kinds, an engine's state and its report.
//! - [`carrier`]: what a heartbeat answer says of the cluster's carrier set.
//! - [`control`]: each control verb's request and answer.
//! - [`answer`]: an inference request's answer, one type from the engine to whoever asked.
//! - [`stream`]: the heads of the `inference` and `blob` stream services.
//! - [`admin`]: the admin API's request bodies (CLI and server).
//! - [`batch`]: the OpenAI Batch API's files, batches and lines, and a line's work unit.
//! - [`federation`]: the federation API's bodies, a grant's signed terms,
//!   and the calls that cross the link between two clusters.
//! - [`copies`]: verified model copies between clusters: manifests, ranges, copy records.
//! - [`decisions`]: the admission decision log: a binding's logging, a record, a query's answer.
//! - [`dry_run`]: an admission chain's dry run: the final answer and each policy's step.
//! - [`models`]: a model revision's manifest.
//! - [`limits`]: limits both sides hold to, each with its reason.
//! - [`openai`]: OpenAI's error shape and `type`, for errors a worker streams to a `/v1` client.
//! - [`link`]: the federation link's handshake messages.
//! - [`plugin`]: plugin kinds, and the modes an admission chain binds a policy with.
//! - [`signing`]: signed plugins: the detached signature, trusted keys, `require_signed`.
//! - [`state`]: node, replica and carrier-row states, stored as text.
//! - [`valid`]: the rules for what clients name things with (names, path parameters, labels).

#![deny(missing_docs)]

/// An enum stored and sent as text: serde, `as_str`, `Display` and
/// `FromStr` from one list of `Variant => "text"` pairs.
macro_rules! text_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $text)] $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The text stored and sent.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }

        // By hand: the derive does not see the texts through the macro's
        // `rename` and would document the variants' Rust names.
        #[cfg(feature = "utoipa")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }

        #[cfg(feature = "utoipa")]
        impl utoipa::ToSchema for $name {}

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::UnknownText;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == text)
                    .ok_or_else(|| $crate::UnknownText {
                        what: stringify!($name),
                        text: text.to_string(),
                    })
            }
        }
    };
}

pub mod admin;
pub mod answer;
pub mod audit;
pub mod batch;
pub mod carrier;
pub mod control;
pub mod copies;
pub mod decisions;
pub mod deployments;
pub mod dry_run;
pub mod engines;
pub mod federation;
pub mod generations;
pub mod health;
pub mod jobs;
pub mod keys;
pub mod labels;
pub mod limits;
pub mod link;
pub mod lists;
pub mod models;
pub mod node;
pub mod nodes;
pub mod openai;
pub mod plugin;
pub mod signing;
pub mod state;
pub mod stream;
pub mod teams;
pub mod usage;
pub mod valid;

/// Text that names no value of a text enum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownText {
    /// The enum.
    pub what: &'static str,
    /// The text.
    pub text: String,
}

impl std::fmt::Display for UnknownText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{:.64}` is not a {}", self.text, self.what)
    }
}

impl std::error::Error for UnknownText {}

/// Deserializes `null` as the default: older senders wrote `null` where
/// these types have an empty value.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    use serde::Deserialize;
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Serializes `value`, parses it back and checks it is unchanged; returns
/// the JSON, for tests that also pin the wire form.
#[cfg(test)]
fn round_trip<T>(value: &T) -> serde_json::Value
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let json = serde_json::to_value(value).expect("serializes");
    let back: T = serde_json::from_value(json.clone()).expect("parses back");
    assert_eq!(&back, value, "{json}");
    json
}
