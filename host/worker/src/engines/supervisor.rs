//! One engine process, kept alive: started, probed until healthy, restarted
//! with exponential backoff when it exits, drained and stopped on request.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, watch};

pub use switchyard_protocol::engines::EngineState;

use super::kind::{EngineBinaries, EngineSpec, Launch};

/// How long an engine may take to answer its health probe after a start.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(300);
/// How often health is probed while starting.
const PROBE_EVERY: Duration = Duration::from_millis(100);
/// The first restart's delay; doubled per attempt up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long SIGTERM has before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

enum Command_ {
    /// Take no new requests (the state says so; `admit` refuses).
    Drain,
    /// Stop the process; answer when it is gone.
    Stop(oneshot::Sender<()>),
}

/// A supervised engine. Dropping the handle stops it.
#[derive(Debug)]
pub struct Engine {
    spec: EngineSpec,
    port: u16,
    /// [`Engine::url`] parsed once: every request's URL is a copy with its
    /// path set, not a fresh parse of the host.
    base: reqwest::Url,
    state: watch::Receiver<EngineState>,
    commands: mpsc::UnboundedSender<Command_>,
    in_flight: Arc<AtomicUsize>,
    restarts: Arc<AtomicU32>,
}

impl std::fmt::Debug for Command_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Command_::Drain => "Drain",
            Command_::Stop(_) => "Stop",
        })
    }
}

/// A request in flight on an engine; dropping it ends it.
#[derive(Debug)]
pub struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Engine {
    /// Starts supervising `spec` on a free local port.
    pub fn start(spec: EngineSpec, binaries: EngineBinaries) -> std::io::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let (state_tx, state) = watch::channel(EngineState::Starting);
        let (commands, received) = mpsc::unbounded_channel();
        let restarts = Arc::new(AtomicU32::new(0));
        tokio::spawn(supervise(
            spec.clone(),
            port,
            binaries,
            state_tx,
            received,
            restarts.clone(),
        ));
        let base = reqwest::Url::parse(&format!("http://127.0.0.1:{port}/"))
            .expect("a loopback URL parses");
        Ok(Self {
            spec,
            port,
            base,
            state,
            commands,
            in_flight: Arc::new(AtomicUsize::new(0)),
            restarts,
        })
    }

    /// What it runs.
    pub fn spec(&self) -> &EngineSpec {
        &self.spec
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The URL of `path` (an absolute path, with its query if any) on the engine.
    pub fn url_of(&self, path: &str) -> reqwest::Url {
        with_path(&self.base, path)
    }

    /// Where it is now.
    pub fn state(&self) -> EngineState {
        self.state.borrow().clone()
    }

    /// Restarts after a crash so far.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Waits until `done` holds for the state; `false` after `timeout`.
    pub async fn wait_for(&self, timeout: Duration, done: impl Fn(&EngineState) -> bool) -> bool {
        let mut state = self.state.clone();
        tokio::time::timeout(timeout, state.wait_for(|s| done(s)))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Admits a request while ready (not while starting, draining or stopped).
    pub fn admit(&self) -> Option<InFlight> {
        if !matches!(*self.state.borrow(), EngineState::Ready { .. }) {
            return None;
        }
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        Some(InFlight(self.in_flight.clone()))
    }

    /// Takes no new requests, waits for those in flight up to `deadline`,
    /// then stops.
    pub async fn drain(&self, deadline: Duration) {
        self.stop_with(Some(deadline)).await;
    }

    /// Stops at once.
    pub async fn stop(&self) {
        self.stop_with(None).await;
    }

    async fn stop_with(&self, drain: Option<Duration>) {
        if let Some(deadline) = drain {
            let _ = self.commands.send(Command_::Drain);
            let _ = self
                .wait_for(deadline, |s| !matches!(s, EngineState::Ready { .. }))
                .await;
            let finished = async {
                while self.in_flight() > 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            if tokio::time::timeout(deadline, finished).await.is_err() {
                tracing::warn!(engine = %self.spec.id, in_flight = self.in_flight(), "drain deadline passed; stopping anyway");
            }
        }
        let (done, stopped) = oneshot::channel();
        if self.commands.send(Command_::Stop(done)).is_ok() {
            let _ = stopped.await;
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.commands.send(Command_::Stop(oneshot::channel().0));
    }
}

async fn supervise(
    spec: EngineSpec,
    port: u16,
    binaries: EngineBinaries,
    state: watch::Sender<EngineState>,
    mut commands: mpsc::UnboundedReceiver<Command_>,
    restarts: Arc<AtomicU32>,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("an HTTP client");
    let health = format!("http://127.0.0.1:{port}{}", spec.kind.health_path());
    let line = spec.kind.command(&spec, port, &binaries);
    let mut attempt = 0u32;
    loop {
        state.send_replace(EngineState::Starting);
        let mut command = Command::new(&line.program);
        command
            .args(&line.args)
            .envs(&line.env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        die_with_the_worker(&mut command);
        let reason = match command.spawn() {
            Err(e) => format!("cannot start {}: {e}", line.program.display()),
            Ok(mut child) => {
                let pid = child.id().unwrap_or_default();
                tracing::info!(engine = %spec.id, kind = spec.kind.as_str(), pid, port, "engine started");
                match run(&mut child, pid, &http, &health, &state, &mut commands).await {
                    Ended::Exited(reason) => reason,
                    Ended::Stop(done) => {
                        state.send_replace(EngineState::Draining);
                        terminate(&mut child).await;
                        state.send_replace(EngineState::Stopped {
                            reason: "stopped".into(),
                        });
                        tracing::info!(engine = %spec.id, "engine stopped");
                        let _ = done.send(());
                        return;
                    }
                }
            }
        };
        attempt += 1;
        restarts.store(attempt, Ordering::Relaxed);
        let delay = FIRST_BACKOFF
            .saturating_mul(1 << (attempt - 1).min(16))
            .min(MAX_BACKOFF);
        tracing::warn!(engine = %spec.id, attempt, reason, retry_in_ms = delay.as_millis() as u64, "engine ended; restarting");
        state.send_replace(EngineState::Restarting {
            attempt,
            reason,
            retry_in_ms: delay.as_millis() as u64,
        });
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            command = commands.recv() => {
                // Nothing in flight while it is down: a drain is a stop.
                state.send_replace(EngineState::Stopped { reason: "stopped".into() });
                if let Some(Command_::Stop(done)) = command {
                    let _ = done.send(());
                }
                return;
            }
        }
    }
}

enum Ended {
    Exited(String),
    Stop(oneshot::Sender<()>),
}

/// Probes until healthy, then waits for the exit or a stop.
async fn run(
    child: &mut Child,
    pid: u32,
    http: &reqwest::Client,
    health: &str,
    state: &watch::Sender<EngineState>,
    commands: &mut mpsc::UnboundedReceiver<Command_>,
) -> Ended {
    let probe = async {
        let started = tokio::time::Instant::now();
        loop {
            if http
                .get(health)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return true;
            }
            if started.elapsed() > STARTUP_TIMEOUT {
                return false;
            }
            tokio::time::sleep(PROBE_EVERY).await;
        }
    };
    tokio::select! {
        status = child.wait() => return Ended::Exited(exit_reason(status)),
        command = commands.recv() => return Ended::Stop(stop_answer(command)),
        healthy = probe => {
            if !healthy {
                return Ended::Exited(format!("no healthy answer within {}s", STARTUP_TIMEOUT.as_secs()));
            }
        }
    }
    state.send_replace(EngineState::Ready { pid });
    loop {
        tokio::select! {
            status = child.wait() => return Ended::Exited(exit_reason(status)),
            command = commands.recv() => match command {
                Some(Command_::Drain) => {
                    state.send_replace(EngineState::Draining);
                }
                other => return Ended::Stop(stop_answer(other)),
            },
        }
    }
}

/// Who waits for a stop (nobody when every handle is gone).
fn stop_answer(command: Option<Command_>) -> oneshot::Sender<()> {
    match command {
        Some(Command_::Stop(done)) => done,
        _ => oneshot::channel().0,
    }
}

fn exit_reason(status: std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(status) => format!("exited with {status}"),
        Err(e) => format!("lost: {e}"),
    }
}

/// SIGTERM, then SIGKILL after the grace.
async fn terminate(child: &mut Child) {
    if let Some(pid) = child.id() {
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await;
        if tokio::time::timeout(STOP_GRACE, child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}

/// The engine gets SIGKILL when the worker dies, however it dies (a killed
/// worker must not leave engines holding GPUs).
#[allow(unsafe_code)]
fn die_with_the_worker(command: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and only
    // calls prctl(2), which is async-signal-safe; it allocates nothing.
    unsafe {
        command.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
}

/// `base` with `path` (and its query, if any): the URL that parsing
/// `base`'s origin followed by `path` gives, without parsing the host again.
fn with_path(base: &reqwest::Url, path: &str) -> reqwest::Url {
    let (path, query) = match path.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path, None),
    };
    let mut url = base.clone();
    url.set_path(path);
    url.set_query(query);
    url
}

#[cfg(test)]
mod url_tests {
    use super::with_path;

    #[test]
    fn a_path_on_the_parsed_base_is_the_url_a_fresh_parse_gives() {
        let base = reqwest::Url::parse("http://127.0.0.1:8123/").unwrap();
        for path in [
            "/v1/chat/completions",
            "/v1/models?limit=2&after=a%20b",
            "/v1/x%41y",
            "/v1/a b",
            "/v1/q?",
        ] {
            let fresh = reqwest::Url::parse(&format!("http://127.0.0.1:8123{path}")).unwrap();
            assert_eq!(with_path(&base, path), fresh, "{path}");
        }
    }
}
