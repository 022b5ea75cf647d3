//! The embedded default: a private PostgreSQL under the data directory, run
//! with the machine's own binaries, listening on a Unix socket only, stopped
//! on exit and reused on the next start.
//!
//! PostgreSQL refuses to run as root; when we are root, `initdb` and the
//! server run as the `postgres` account that Debian's package creates, and
//! the cluster directory is owned by it.

use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::StoreError;

/// The socket directory path must leave room for `/.s.PGSQL.5432` within
/// the kernel's 108-byte limit for Unix socket paths.
const MAX_SOCKET_DIR_LEN: usize = 90;

/// The database Switchyard uses inside the private cluster.
const DATABASE: &str = "switchyard";

/// The account PostgreSQL runs as when we are root.
const SERVICE_ACCOUNT: &str = "postgres";

/// A private PostgreSQL cluster.
#[derive(Debug)]
pub struct EmbeddedPostgres {
    bin_dir: PathBuf,
    cluster_dir: PathBuf,
    socket_dir: PathBuf,
    log_file: PathBuf,
    run_as: Option<(u32, u32)>,
    /// Whether this process started the server (and so stops it).
    started_here: bool,
}

impl EmbeddedPostgres {
    /// Initialises the cluster under `data_dir/postgres` if needed and starts it
    /// (or reuses one that is already running there).
    pub fn start(data_dir: &Path) -> Result<Self, StoreError> {
        let bin_dir = find_binaries()?;
        std::fs::create_dir_all(data_dir)
            .map_err(|e| io_err("creating the data directory", data_dir, e))?;
        let data_dir = data_dir
            .canonicalize()
            .map_err(|e| io_err("resolving the data directory", data_dir, e))?;
        let run_as = service_account()?;
        let mut pg = Self {
            bin_dir,
            cluster_dir: data_dir.join("postgres"),
            socket_dir: data_dir.join("postgres-run"),
            log_file: data_dir.join("postgres").join("server.log"),
            run_as,
            started_here: false,
        };
        if pg.socket_dir.as_os_str().len() > MAX_SOCKET_DIR_LEN {
            return Err(StoreError::Embedded(format!(
                "the data directory path is too long for a Unix socket ({}); choose a shorter --data-dir",
                pg.socket_dir.display()
            )));
        }
        if run_as.is_some() {
            check_traversable(&data_dir)?;
        }
        for dir in [&pg.cluster_dir, &pg.socket_dir] {
            std::fs::create_dir_all(dir).map_err(|e| io_err("creating", dir, e))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| io_err("setting permissions on", dir, e))?;
            if let Some((uid, gid)) = run_as {
                chown(dir, Some(uid), Some(gid))
                    .map_err(|e| io_err("changing the owner of", dir, e))?;
            }
        }
        if !pg.cluster_dir.join("PG_VERSION").exists() {
            tracing::info!(dir = %pg.cluster_dir.display(), "initialising a private PostgreSQL cluster");
            pg.run("initdb", |c| {
                c.arg("-D").arg(&pg.cluster_dir).args([
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                ])
            })?;
        }
        if pg
            .run("pg_ctl", |c| c.arg("status").arg("-D").arg(&pg.cluster_dir))
            .is_ok()
        {
            tracing::info!("reusing the private PostgreSQL already running");
        } else {
            tracing::info!(socket = %pg.socket_dir.display(), "starting the private PostgreSQL");
            let options = format!(
                "-c listen_addresses='' -c unix_socket_directories='{}' -c port=5432",
                pg.socket_dir.display()
            );
            pg.run("pg_ctl", |c| {
                c.arg("start")
                    .arg("-D")
                    .arg(&pg.cluster_dir)
                    .arg("-l")
                    .arg(&pg.log_file)
                    .args(["-w", "-t", "60", "-o", &options])
            })?;
            pg.started_here = true;
        }
        if let Err(e) = pg.run("psql", |c| {
            c.args(["-X", "-q", "-h"])
                .arg(&pg.socket_dir)
                .args(["-U", "postgres", "-d", "postgres", "-c"])
                .arg(format!("CREATE DATABASE {DATABASE}"))
        }) && !e.to_string().contains("already exists")
        {
            return Err(e);
        }
        Ok(pg)
    }

    /// The connection string of Switchyard's database in this cluster.
    pub fn url(&self) -> String {
        format!(
            "host={} port=5432 user=postgres dbname={DATABASE}",
            self.socket_dir.display()
        )
    }

    /// Stops the server if this process started it.
    pub fn stop(&mut self) -> Result<(), StoreError> {
        if !std::mem::take(&mut self.started_here) {
            return Ok(());
        }
        tracing::info!("stopping the private PostgreSQL");
        self.run("pg_ctl", |c| {
            c.arg("stop")
                .arg("-D")
                .arg(&self.cluster_dir)
                .args(["-m", "fast", "-w"])
        })?;
        Ok(())
    }

    fn run(
        &self,
        program: &str,
        args: impl FnOnce(&mut Command) -> &mut Command,
    ) -> Result<Output, StoreError> {
        let mut command = Command::new(self.bin_dir.join(program));
        if program == "psql" && !self.bin_dir.join(program).exists() {
            command = Command::new(program);
        }
        args(&mut command);
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid).current_dir("/");
        }
        let output = command
            .output()
            .map_err(|e| StoreError::Embedded(format!("could not run {program}: {e}")))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let stdout = String::from_utf8_lossy(&output.stdout);
            return Err(StoreError::Embedded(format!(
                "{program} failed ({}): {}{}",
                output.status,
                stderr.trim(),
                if stderr.trim().is_empty() {
                    stdout.trim()
                } else {
                    ""
                }
            )));
        }
        Ok(output)
    }
}

impl Drop for EmbeddedPostgres {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::warn!(error = %e, "could not stop the private PostgreSQL");
        }
    }
}

/// The directory holding `initdb` and `pg_ctl`: Debian's versioned directory
/// (newest first), then PATH.
fn find_binaries() -> Result<PathBuf, StoreError> {
    let mut versioned: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .collect();
    versioned.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    versioned
        .into_iter()
        .rev()
        .chain(on_path)
        .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
        .ok_or_else(|| {
            StoreError::Embedded(
                "no PostgreSQL binaries found (initdb and pg_ctl, on PATH or under /usr/lib/postgresql/*/bin): \
                 install PostgreSQL (apt-get install postgresql) or pass --database-url"
                    .into(),
            )
        })
}

/// `Some((uid, gid))` of the service account when we are root, else `None`.
fn service_account() -> Result<Option<(u32, u32)>, StoreError> {
    if !running_as_root() {
        return Ok(None);
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[0] == SERVICE_ACCOUNT)
        .and_then(|f| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
        .map(Some)
        .ok_or_else(|| {
            StoreError::Embedded(format!(
                "running as root, and PostgreSQL refuses to run as root, but there is no '{SERVICE_ACCOUNT}' \
                 account to run it as: install Debian's postgresql package or pass --database-url"
            ))
        })
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

/// The service account must be able to walk down to the data directory.
fn check_traversable(dir: &Path) -> Result<(), StoreError> {
    for ancestor in dir.ancestors().skip(1) {
        let mode = std::fs::metadata(ancestor)
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        if mode & 0o001 == 0 {
            return Err(StoreError::Embedded(format!(
                "the '{SERVICE_ACCOUNT}' account cannot reach {} because {} is not searchable by others; \
                 choose a --data-dir outside it, or pass --database-url",
                dir.display(),
                ancestor.display()
            )));
        }
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
        .map_err(|e| io_err("setting permissions on", dir, e))
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Embedded(format!("{what} {}: {e}", path.display()))
}
