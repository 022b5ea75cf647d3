//! A declared inventory, for machines without GPUs and for tests.
//!
//! On the command line, one spec per `--gpu`, repeated:
//!
//! ```text
//! --gpu "name=H200,memory=141GiB" --gpu "name=L4,memory=22.5GiB,count=2"
//! ```
//!
//! or a JSON file with the same keys:
//!
//! ```json
//! [{"name": "H200", "memory": "141GiB", "count": 2}]
//! ```
//!
//! [`expand`] numbers the GPUs in the order they were declared.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

use crate::inventory::Gpu;
use crate::size::{SizeError, parse_size};

/// The most GPUs one spec may declare: more than any machine holds, so a typo
/// such as `count=800` fails instead of reporting 800 GPUs to the scheduler.
pub const MAX_COUNT: u32 = 256;

/// A declaration that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DeclaredError {
    /// A spec item without `=`.
    #[error("{0:?} is not key=value; declare a GPU like name=H200,memory=141GiB")]
    NotKeyValue(String),
    /// A key other than name, memory and count.
    #[error("unknown key {0:?}; a GPU has name, memory and optionally count")]
    UnknownKey(String),
    /// A key given twice in one spec.
    #[error("{0} is given twice")]
    DuplicateKey(&'static str),
    /// No name, or an empty one.
    #[error("a GPU needs a name, like name=H200")]
    MissingName,
    /// No memory.
    #[error("a GPU needs its memory, like memory=141GiB")]
    MissingMemory,
    /// The memory is not a size.
    #[error("memory: {0}")]
    Memory(#[from] SizeError),
    /// A memory of zero bytes.
    #[error("memory must be more than zero")]
    ZeroMemory,
    /// The count is not a whole number.
    #[error("count {0:?} is not a whole number")]
    BadCount(String),
    /// A count of zero, or over [`MAX_COUNT`].
    #[error("count must be between 1 and {MAX_COUNT}, got {0}")]
    CountOutOfRange(u32),
    /// The file could not be read.
    #[error("could not read the GPU file {}: {reason}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: std::io::Error,
    },
    /// The file is not a JSON list of valid specs.
    #[error("the GPU file {}: {reason}", .path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// What serde_json found, with its line and column.
        reason: serde_json::Error,
    },
}

/// One declared GPU model and how many of it the machine has.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawSpec")]
pub struct GpuSpec {
    /// The model's name.
    pub name: String,
    /// Memory on each GPU, in bytes.
    pub memory_bytes: u64,
    /// How many GPUs of this model, from 1 to [`MAX_COUNT`].
    pub count: u32,
}

impl GpuSpec {
    /// Checks the parts of a spec, wherever they were written.
    fn from_parts(
        name: Option<&str>,
        memory: Option<&str>,
        count: Option<u32>,
    ) -> Result<Self, DeclaredError> {
        let name = name.map(str::trim).filter(|name| !name.is_empty());
        let name = name.ok_or(DeclaredError::MissingName)?;
        let memory_bytes = parse_size(memory.ok_or(DeclaredError::MissingMemory)?)?;
        if memory_bytes == 0 {
            return Err(DeclaredError::ZeroMemory);
        }
        let count = count.unwrap_or(1);
        if !(1..=MAX_COUNT).contains(&count) {
            return Err(DeclaredError::CountOutOfRange(count));
        }
        Ok(GpuSpec {
            name: name.to_owned(),
            memory_bytes,
            count,
        })
    }
}

impl FromStr for GpuSpec {
    type Err = DeclaredError;

    /// Reads `name=H200,memory=141GiB[,count=N]`; keys in any order and case.
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let (mut name, mut memory, mut count) = (None, None, None);
        for item in spec
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| DeclaredError::NotKeyValue(item.to_owned()))?;
            let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
            let (slot, key) = match key.as_str() {
                "name" => (&mut name, "name"),
                "memory" => (&mut memory, "memory"),
                "count" => (&mut count, "count"),
                _ => return Err(DeclaredError::UnknownKey(key)),
            };
            if slot.replace(value).is_some() {
                return Err(DeclaredError::DuplicateKey(key));
            }
        }
        let count = count
            .map(|count| {
                count
                    .parse()
                    .map_err(|_| DeclaredError::BadCount(count.to_owned()))
            })
            .transpose()?;
        GpuSpec::from_parts(name, memory, count)
    }
}

/// A spec as the file writes it, before it is checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: Option<String>,
    memory: Option<String>,
    count: Option<u32>,
}

impl TryFrom<RawSpec> for GpuSpec {
    type Error = DeclaredError;

    fn try_from(raw: RawSpec) -> Result<Self, Self::Error> {
        GpuSpec::from_parts(raw.name.as_deref(), raw.memory.as_deref(), raw.count)
    }
}

/// Reads a JSON file of specs.
pub fn read_file(path: &Path) -> Result<Vec<GpuSpec>, DeclaredError> {
    let text = std::fs::read_to_string(path).map_err(|reason| DeclaredError::Read {
        path: path.to_owned(),
        reason,
    })?;
    serde_json::from_str(&text).map_err(|reason| DeclaredError::Json {
        path: path.to_owned(),
        reason,
    })
}

/// The GPUs the specs declare, numbered from 0 in the order given.
pub fn expand(specs: &[GpuSpec]) -> Vec<Gpu> {
    let each = specs
        .iter()
        .flat_map(|spec| std::iter::repeat_n(spec, spec.count as usize));
    (0u32..)
        .zip(each)
        .map(|(index, spec)| Gpu {
            index,
            name: spec.name.clone(),
            uuid: None,
            memory_total_bytes: spec.memory_bytes,
            memory_used_bytes: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn spec(text: &str) -> Result<GpuSpec, DeclaredError> {
        text.parse()
    }

    #[test]
    fn a_spec_with_name_and_memory() {
        assert_eq!(
            spec("name=H200,memory=141GiB").unwrap(),
            GpuSpec {
                name: "H200".into(),
                memory_bytes: 141 * GIB,
                count: 1
            }
        );
    }

    #[test]
    fn keys_in_any_order_and_case_with_spaces() {
        let parsed = spec(" COUNT = 2 , Memory=79.6GiB, name = NVIDIA A100 80GB ,").unwrap();
        assert_eq!(parsed.name, "NVIDIA A100 80GB");
        assert_eq!(parsed.memory_bytes, 85_469_849_190);
        assert_eq!(parsed.count, 2);
    }

    #[test]
    fn spec_errors_say_what_is_wrong() {
        let cases = [
            (
                "name=H200,memory=141GiB,vendor=nvidia",
                "unknown key \"vendor\"",
            ),
            ("name=H200,141GiB", "\"141GiB\" is not key=value"),
            ("name=H200,name=L4,memory=1GiB", "name is given twice"),
            ("memory=141GiB", "needs a name"),
            ("name= ,memory=141GiB", "needs a name"),
            ("name=H200", "needs its memory"),
            ("", "needs a name"),
            ("name=H200,memory=141", "has no unit"),
            ("name=H200,memory=141XB", "unknown unit \"XB\""),
            ("name=H200,memory=0GiB", "more than zero"),
            ("name=H200,memory=1GiB,count=0", "between 1 and 256, got 0"),
            ("name=H200,memory=1GiB,count=257", "got 257"),
            (
                "name=H200,memory=1GiB,count=two",
                "count \"two\" is not a whole number",
            ),
            ("name=H200,memory=1GiB,count=-1", "count \"-1\""),
        ];
        for (input, expected) in cases {
            let error = spec(input).unwrap_err().to_string();
            assert!(error.contains(expected), "{input:?}: {error}");
        }
    }

    #[test]
    fn expand_numbers_gpus_in_declaration_order() {
        let specs = [
            spec("name=H200,memory=141GiB,count=2").unwrap(),
            spec("name=L4,memory=24GB").unwrap(),
        ];
        let gpus = expand(&specs);
        let summary: Vec<_> = gpus
            .iter()
            .map(|gpu| (gpu.index, gpu.name.as_str(), gpu.memory_total_bytes))
            .collect();
        assert_eq!(
            summary,
            [
                (0, "H200", 141 * GIB),
                (1, "H200", 141 * GIB),
                (2, "L4", 24_000_000_000)
            ]
        );
        assert!(
            gpus.iter()
                .all(|gpu| gpu.uuid.is_none() && gpu.memory_used_bytes.is_none())
        );
        assert!(expand(&[]).is_empty());
    }

    fn write(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn a_file_of_specs() {
        let file = write(
            r#"[{"name": "H200", "memory": "141GiB", "count": 2},
                {"name": "L4", "memory": "24 GB"}]"#,
        );
        let specs = read_file(file.path()).unwrap();
        assert_eq!(specs[0], spec("name=H200,memory=141GiB,count=2").unwrap());
        assert_eq!(specs[1], spec("name=L4,memory=24GB").unwrap());
        assert_eq!(expand(&specs).len(), 3);
        assert!(read_file(write("[]").path()).unwrap().is_empty());
    }

    #[test]
    fn file_errors_name_the_file_and_the_problem() {
        let cases = [
            (
                r#"[{"name": "H200", "memory": "141GiB", "vendor": "x"}]"#,
                "unknown field `vendor`",
            ),
            (r#"[{"memory": "141GiB"}]"#, "needs a name"),
            (r#"[{"name": "H200"}]"#, "needs its memory"),
            (
                r#"[{"name": "H200", "memory": "lots"}]"#,
                "does not start with a number",
            ),
            (
                r#"[{"name": "H200", "memory": "1GiB", "count": 0}]"#,
                "got 0",
            ),
            (r#"[{"name": "H200", "memory": 141}]"#, "expected a string"),
            (
                r#"{"name": "H200", "memory": "141GiB"}"#,
                "expected a sequence",
            ),
            ("[", "EOF"),
        ];
        for (text, expected) in cases {
            let file = write(text);
            let error = read_file(file.path()).unwrap_err();
            assert!(
                matches!(error, DeclaredError::Json { .. }),
                "{text}: {error:?}"
            );
            let message = error.to_string();
            assert!(message.contains(expected), "{text}: {message}");
            assert!(
                message.contains(&file.path().display().to_string()),
                "{message}"
            );
        }
    }

    #[test]
    fn a_missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpus.json");
        let error = read_file(&path).unwrap_err();
        assert!(matches!(error, DeclaredError::Read { .. }), "{error:?}");
        assert!(error.to_string().contains("gpus.json"), "{error}");
    }
}
