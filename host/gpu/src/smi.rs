//! The `nvidia-smi` fallback, for where NVML cannot be loaded but the tool
//! runs.
//!
//! - `parse.rs`: its CSV output.
//! - here: running it, with a deadline.

mod parse;

pub use parse::LineError;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::inventory::Gpu;

/// The program, found through `PATH`.
pub const PROGRAM: &str = "nvidia-smi";

/// How long `nvidia-smi` may take: it can hang for minutes when the driver is
/// wedged, and a worker's start must not wait for that.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// How often the runner checks whether the program has exited.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// How much of a failing run's output an error keeps: enough for
/// nvidia-smi's own one-line diagnoses.
const OUTPUT_IN_ERROR: usize = 512;

/// What went wrong running `nvidia-smi` or reading its output.
#[derive(Debug, thiserror::Error)]
pub enum SmiError {
    /// The program is not installed (or not on `PATH`).
    #[error("{} was not found; it comes with the NVIDIA driver", .program.display())]
    NotInstalled {
        /// The program as given.
        program: PathBuf,
    },
    /// The program could not be started, or waited for.
    #[error("could not run {}: {reason}", .program.display())]
    Run {
        /// The program as given.
        program: PathBuf,
        /// Why.
        reason: std::io::Error,
    },
    /// The program did not exit in time, and was killed.
    #[error("{} did not answer within {after:?} and was stopped; is the driver hung?", .program.display())]
    TimedOut {
        /// The program as given.
        program: PathBuf,
        /// The deadline it missed.
        after: Duration,
    },
    /// The program exited with a failure.
    #[error("{} failed ({status}): {output}", .program.display())]
    Failed {
        /// The program as given.
        program: PathBuf,
        /// How it exited.
        status: ExitStatus,
        /// The start of what it printed, stdout then stderr.
        output: String,
    },
    /// A line of its output could not be read.
    #[error("nvidia-smi output line {line} ({text:?}): {reason}")]
    BadLine {
        /// The line's number, from 1.
        line: usize,
        /// The line.
        text: String,
        /// What is wrong with it.
        reason: LineError,
    },
}

/// Every GPU `nvidia-smi` on `PATH` lists.
pub fn query() -> Result<Vec<Gpu>, SmiError> {
    query_with(Path::new(PROGRAM), TIMEOUT)
}

/// Every GPU `program` lists, asked as `nvidia-smi` is.
pub fn query_with(program: &Path, timeout: Duration) -> Result<Vec<Gpu>, SmiError> {
    let mut command = Command::new(program);
    command
        .arg(format!("--query-gpu={}", parse::FIELDS.join(",")))
        .arg("--format=csv,noheader,nounits");
    let output = run(program, command, timeout)?;
    parse_output(&output)
}

/// The GPUs in a query's output.
pub fn parse_output(output: &str) -> Result<Vec<Gpu>, SmiError> {
    parse::parse(output).map_err(|(line, text, reason)| SmiError::BadLine { line, text, reason })
}

/// Runs `command` to its end or the deadline, and returns its stdout.
fn run(program: &Path, mut command: Command, timeout: Duration) -> Result<String, SmiError> {
    let program = || program.to_owned();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|reason| match reason.kind() {
            std::io::ErrorKind::NotFound => SmiError::NotInstalled { program: program() },
            _ => SmiError::Run {
                program: program(),
                reason,
            },
        })?;
    // Read both pipes while waiting, so a chatty child never blocks on a full one.
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(POLL_INTERVAL),
            Ok(None) => {
                // Killing closes its pipes, which ends the reading threads.
                let _ = child.kill();
                let _ = child.wait();
                return Err(SmiError::TimedOut {
                    program: program(),
                    after: timeout,
                });
            }
            Err(reason) => {
                return Err(SmiError::Run {
                    program: program(),
                    reason,
                });
            }
        }
    };
    let stdout = String::from_utf8_lossy(&stdout.join().unwrap_or_default()).into_owned();
    if status.success() {
        return Ok(stdout);
    }
    let stderr = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
    let output = format!("{} {}", stdout.trim(), stderr.trim());
    Err(SmiError::Failed {
        program: program(),
        status,
        output: truncate(output.trim(), OUTPUT_IN_ERROR),
    })
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            // A read error leaves what was read; the exit status says the rest.
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

fn truncate(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fake_program;

    const SAMPLE: &str = "0, NVIDIA H200, GPU-1, 143771, 1\n1, NVIDIA H200, GPU-2, 143771, 2\n";

    #[test]
    fn a_missing_program_is_named() {
        for program in [
            "/nonexistent/nvidia-smi",
            "switchyard-test-no-such-nvidia-smi",
        ] {
            let error = query_with(Path::new(program), TIMEOUT).unwrap_err();
            assert!(matches!(error, SmiError::NotInstalled { .. }), "{error:?}");
            assert_eq!(
                error.to_string(),
                format!("{program} was not found; it comes with the NVIDIA driver")
            );
        }
    }

    #[test]
    fn runs_the_program_with_the_query_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            r#"[ "$1" = "--query-gpu=index,name,uuid,memory.total,memory.used" ] || exit 3
[ "$2" = "--format=csv,noheader,nounits" ] || exit 4
printf '{}'"#,
            SAMPLE.replace('\n', "\\n")
        );
        let program = fake_program(dir.path(), &script);
        let gpus = query_with(&program, TIMEOUT).unwrap();
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[1].name, "NVIDIA H200");
        assert_eq!(gpus[1].memory_used_bytes, Some(2 << 20));
    }

    #[test]
    fn a_failure_keeps_what_the_program_said() {
        let dir = tempfile::tempdir().unwrap();
        let program = fake_program(
            dir.path(),
            "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\n\
             echo 'more on stderr' >&2\nexit 9",
        );
        let error = query_with(&program, TIMEOUT).unwrap_err();
        let SmiError::Failed { status, output, .. } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(status.code(), Some(9));
        assert_eq!(
            output,
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. more on stderr"
        );
        assert!(
            error.to_string().contains("failed (exit status: 9)"),
            "{error}"
        );
    }

    #[test]
    fn a_hung_program_is_stopped_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let program = fake_program(dir.path(), "exec sleep 30");
        let started = Instant::now();
        let error = query_with(&program, Duration::from_millis(200)).unwrap_err();
        assert!(matches!(error, SmiError::TimedOut { .. }), "{error:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(
            error.to_string().contains("did not answer within 200ms"),
            "{error}"
        );
    }

    #[test]
    fn unreadable_output_names_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let program = fake_program(dir.path(), "echo '0, NVIDIA H200, GPU-1, [N/A], [N/A]'");
        let error = query_with(&program, TIMEOUT).unwrap_err();
        assert_eq!(
            error.to_string(),
            "nvidia-smi output line 1 (\"0, NVIDIA H200, GPU-1, [N/A], [N/A]\"): memory.total is not available"
        );
    }

    #[test]
    fn a_program_that_cannot_start_is_a_run_error() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("nvidia-smi");
        std::fs::write(&program, "not executable").unwrap();
        let error = query_with(&program, TIMEOUT).unwrap_err();
        assert!(matches!(error, SmiError::Run { .. }), "{error:?}");
    }

    #[test]
    fn long_output_is_cut() {
        assert_eq!(truncate("abcdef", 3), "abc…");
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("ééé", 2), "éé…");
    }
}
