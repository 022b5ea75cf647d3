//! The `switchyard` binary as a real child process.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The built binary (`SWITCHYARD_BIN`, beside this program, or beside this
/// test's `deps/` folder).
pub fn binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("SWITCHYARD_BIN") {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("current exe");
    // A program beside it (`switchyard-bench` in `target/release`).
    let sibling = exe.with_file_name("switchyard");
    if sibling.is_file() {
        return sibling;
    }
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("switchyard"))
        .expect("target layout");
    assert!(
        bin.is_file(),
        "{} is missing: build it first (cargo build -p switchyard)",
        bin.display()
    );
    bin
}

/// The children's log filter: `SWITCHYARD_TEST_RUST_LOG` (to look into a
/// failure), else warnings only.
fn log_filter() -> String {
    std::env::var("SWITCHYARD_TEST_RUST_LOG").unwrap_or_else(|_| "warn".into())
}

/// A `switchyard serve` child; SIGTERM on drop.
pub struct ServeProcess {
    /// The child.
    pub child: Child,
    /// `http://ADDR` it printed.
    pub url: String,
    /// Every stdout line printed up to "listening on".
    pub stdout: Vec<String>,
}

impl ServeProcess {
    /// Starts the frontend of a test cluster: `database_url`, workers
    /// approved at once, its state under `data_dir`, on the `nats` set when a
    /// NATS URL is given (else `tunnel`), the test admin token, and `extra`
    /// flags.
    pub fn on_set(
        database_url: &str,
        data_dir: &std::path::Path,
        nats_url: Option<&str>,
        extra: &[&str],
    ) -> Self {
        Self::on_set_to(database_url, data_dir, nats_url, extra, None)
    }

    /// [`ServeProcess::on_set`]; with `log`, the child logs at `info` into
    /// it (a test reads what the replica wrote) instead of warnings to
    /// this process's stderr.
    pub fn on_set_to(
        database_url: &str,
        data_dir: &std::path::Path,
        nats_url: Option<&str>,
        extra: &[&str],
        log: Option<Stdio>,
    ) -> Self {
        let data_dir = data_dir.to_str().expect("a UTF-8 data folder");
        let mut args = vec![
            "--database-url",
            database_url,
            "--auto-approve",
            "--data-dir",
            data_dir,
        ];
        if let Some(url) = nats_url {
            args.extend(["--nats-url", url]);
        }
        args.extend(extra);
        let admin = ("SWITCHYARD_ADMIN_TOKEN", crate::ADMIN_TOKEN);
        match log {
            Some(log) => Self::start_to(&args, &[admin, ("RUST_LOG", "info")], log),
            None => Self::start(&args, &[admin]),
        }
    }

    /// Starts `switchyard serve` with `args` and `env` (an empty value
    /// removes the variable), and waits for "listening on".
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_to(args, env, Stdio::inherit())
    }

    /// [`ServeProcess::start`] with the child's log (stderr) sent to `stderr`.
    pub fn start_to(args: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Self {
        let mut command = Command::new(binary());
        command
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env("RUST_LOG", log_filter())
            .stdout(Stdio::piped())
            .stderr(stderr);
        for (k, v) in env {
            match v.is_empty() {
                true => command.env_remove(k),
                false => command.env(k, v),
            };
        }
        let mut child = command.spawn().expect("spawning switchyard serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lines = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    let url = line.strip_prefix("listening on ").map(str::to_string);
                    lines.push(line);
                    if let Some(url) = url {
                        return Self {
                            child,
                            url,
                            stdout: lines,
                        };
                    }
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("switchyard serve did not start ({e}); stdout so far: {lines:?}");
                }
            }
        }
    }

    /// SIGTERM, then wait for the exit; returns whether it exited cleanly.
    pub fn terminate(&mut self) -> bool {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        self.child.wait().map(|s| s.success()).unwrap_or(false)
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.terminate();
        }
    }
}

/// For a worker started without extra flags.
pub const NO_FLAGS: &[&str] = &[];

/// A `switchyard worker` child; SIGTERM on drop.
pub struct WorkerProcess {
    /// The child.
    pub child: Child,
}

impl WorkerProcess {
    /// Starts `switchyard worker` registering at `frontend` with `token`,
    /// its identity under `dir`, heartbeating every 100 ms; `extra` adds flags.
    pub fn start(
        frontend: &str,
        token: &str,
        name: &str,
        dir: &std::path::Path,
        extra: &[impl AsRef<std::ffi::OsStr>],
    ) -> Self {
        let child = Command::new(binary())
            .args([
                "worker",
                "--frontend",
                frontend,
                "--registration-token",
                token,
                "--name",
                name,
                "--heartbeat-ms",
                "100",
                "--data-dir",
            ])
            .arg(dir)
            .args(extra)
            .env("RUST_LOG", log_filter())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawning switchyard worker");
        Self { child }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}
