//! The CSV `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` prints.
//!
//! One line per GPU: `0, NVIDIA H200, GPU-5f0c..., 143771, 1`, memory in MiB.

use crate::inventory::Gpu;

/// The fields asked for, in the order asked.
pub(super) const FIELDS: [&str; 5] = ["index", "name", "uuid", "memory.total", "memory.used"];

const MIB: u64 = 1 << 20;

/// What is wrong with one line of the output.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// Not five fields.
    #[error(
        "expected 5 comma-separated fields (index, name, uuid, memory.total, memory.used), found {0}"
    )]
    FieldCount(usize),
    /// A field that must be there is `[N/A]`, `[Not Supported]` or empty.
    #[error("{0} is not available")]
    Unavailable(&'static str),
    /// A field that should be a whole number is not.
    #[error("{field} {value:?} is not a whole number")]
    NotANumber {
        /// The field.
        field: &'static str,
        /// Its text.
        value: String,
    },
    /// A memory size too large for a `u64` in bytes.
    #[error("{0} is too large")]
    TooLarge(&'static str),
}

/// The GPUs in the output; blank lines are skipped.
pub(super) fn parse(output: &str) -> Result<Vec<Gpu>, (usize, String, LineError)> {
    output
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| {
            parse_line(line).map_err(|error| (number + 1, line.trim().to_owned(), error))
        })
        .collect()
}

fn parse_line(line: &str) -> Result<Gpu, LineError> {
    let fields: Vec<&str> = line.split(',').map(str::trim).collect();
    let &[index, name, uuid, total, used] = fields.as_slice() else {
        return Err(LineError::FieldCount(fields.len()));
    };
    let required =
        |field: &'static str, value| available(value).ok_or(LineError::Unavailable(field));
    Ok(Gpu {
        index: number(FIELDS[0], required(FIELDS[0], index)?)?,
        name: required(FIELDS[1], name)?.to_owned(),
        uuid: available(uuid).map(str::to_owned),
        memory_total_bytes: mib(FIELDS[3], required(FIELDS[3], total)?)?,
        memory_used_bytes: available(used)
            .map(|used| mib(FIELDS[4], used))
            .transpose()?,
    })
}

/// The value, unless nvidia-smi says it has none: `[N/A]`, `[Not Supported]`,
/// `[Unknown Error]` and the like, all in brackets, or an empty field.
fn available(value: &str) -> Option<&str> {
    let unavailable =
        value.is_empty() || value == "N/A" || (value.starts_with('[') && value.ends_with(']'));
    (!unavailable).then_some(value)
}

fn number<T: std::str::FromStr>(field: &'static str, value: &str) -> Result<T, LineError> {
    value.parse().map_err(|_| LineError::NotANumber {
        field,
        value: value.to_owned(),
    })
}

fn mib(field: &'static str, value: &str) -> Result<u64, LineError> {
    number::<u64>(field, value)?
        .checked_mul(MIB)
        .ok_or(LineError::TooLarge(field))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(
        index: u32,
        name: &str,
        uuid: Option<&str>,
        total_mib: u64,
        used_mib: Option<u64>,
    ) -> Gpu {
        Gpu {
            index,
            name: name.into(),
            uuid: uuid.map(Into::into),
            memory_total_bytes: total_mib * MIB,
            memory_used_bytes: used_mib.map(|used| used * MIB),
        }
    }

    #[test]
    fn several_gpus() {
        let output = "\
0, NVIDIA H200, GPU-5f0c2e1a-0000-0000-0000-000000000000, 143771, 1
1, NVIDIA H200, GPU-5f0c2e1a-0000-0000-0000-000000000001, 143771, 70234
";
        assert_eq!(
            parse(output).unwrap(),
            [
                gpu(
                    0,
                    "NVIDIA H200",
                    Some("GPU-5f0c2e1a-0000-0000-0000-000000000000"),
                    143_771,
                    Some(1)
                ),
                gpu(
                    1,
                    "NVIDIA H200",
                    Some("GPU-5f0c2e1a-0000-0000-0000-000000000001"),
                    143_771,
                    Some(70_234)
                ),
            ]
        );
    }

    #[test]
    fn spaces_tabs_crlf_and_blank_lines() {
        let output =
            "\r\n  0 ,\tNVIDIA L4 ,GPU-1,  23034 ,0 \r\n\n   \n1,Tesla T4,GPU-2,15360,5\r\n";
        assert_eq!(
            parse(output).unwrap(),
            [
                gpu(0, "NVIDIA L4", Some("GPU-1"), 23_034, Some(0)),
                gpu(1, "Tesla T4", Some("GPU-2"), 15_360, Some(5)),
            ]
        );
        assert_eq!(parse("").unwrap(), []);
        assert_eq!(parse("\n\n").unwrap(), []);
    }

    #[test]
    fn optional_fields_that_are_not_available() {
        let output = "0, NVIDIA A100-SXM4-80GB, [N/A], 81920, [Not Supported]\n\
                      1, NVIDIA A100-SXM4-80GB, GPU-2, 81920, [N/A]\n";
        assert_eq!(
            parse(output).unwrap(),
            [
                gpu(0, "NVIDIA A100-SXM4-80GB", None, 81_920, None),
                gpu(1, "NVIDIA A100-SXM4-80GB", Some("GPU-2"), 81_920, None),
            ]
        );
    }

    #[test]
    fn a_malformed_line_is_named() {
        let output = "0, NVIDIA H200, GPU-1, 143771, 1\n\nNo devices were found\n";
        let (line, text, error) = parse(output).unwrap_err();
        assert_eq!((line, text.as_str()), (3, "No devices were found"));
        assert_eq!(error, LineError::FieldCount(1));
    }

    #[test]
    fn line_errors_say_which_field() {
        let cases = [
            ("0, H200, GPU-1, 143771", LineError::FieldCount(4)),
            ("0, H200, GPU-1, 143771, 1, extra", LineError::FieldCount(6)),
            (
                "[N/A], H200, GPU-1, 143771, 1",
                LineError::Unavailable("index"),
            ),
            ("0, , GPU-1, 143771, 1", LineError::Unavailable("name")),
            // Some unified-memory GPUs report no total; declare those instead.
            (
                "0, H200, GPU-1, [N/A], 1",
                LineError::Unavailable("memory.total"),
            ),
            (
                "0, H200, GPU-1, [Not Supported], 1",
                LineError::Unavailable("memory.total"),
            ),
            (
                "x, H200, GPU-1, 143771, 1",
                LineError::NotANumber {
                    field: "index",
                    value: "x".into(),
                },
            ),
            (
                "0, H200, GPU-1, 143771 MiB, 1",
                LineError::NotANumber {
                    field: "memory.total",
                    value: "143771 MiB".into(),
                },
            ),
            (
                "0, H200, GPU-1, 143771, -1",
                LineError::NotANumber {
                    field: "memory.used",
                    value: "-1".into(),
                },
            ),
            (
                "0, H200, GPU-1, 18446744073709551615, 1",
                LineError::TooLarge("memory.total"),
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(
                parse(line).unwrap_err(),
                (1, line.to_owned(), expected),
                "{line}"
            );
        }
    }
}
