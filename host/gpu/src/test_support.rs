//! Helpers shared by the crate's tests.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// An executable shell script `dir/nvidia-smi` running `body`.
///
/// A child process writes it, not this one: a file this multi-threaded test
/// process held open for writing could leak, through another test's fork, into
/// a child still running when the script is executed, which then fails with
/// "Text file busy" (ETXTBSY).
pub(crate) fn fake_program(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("nvidia-smi");
    let mut writer = Command::new("sh")
        .args(["-c", r#"cat > "$1" && chmod +x "$1""#, "sh"])
        .arg(&path)
        .stdin(Stdio::piped())
        .spawn()
        .expect("sh");
    let mut stdin = writer.stdin.take().expect("stdin");
    write!(stdin, "#!/bin/sh\n{body}\n").expect("write the script");
    drop(stdin);
    assert!(writer.wait().expect("sh").success());
    path
}
