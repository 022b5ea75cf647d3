//! A real `nats-server` child process on a port of its own.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running nats-server; killed on drop.
pub struct NatsServer {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    args: Vec<String>,
}

fn binary() -> &'static str {
    if std::path::Path::new("/usr/sbin/nats-server").exists() {
        "/usr/sbin/nats-server"
    } else {
        "nats-server"
    }
}

impl NatsServer {
    /// Starts one with extra arguments (e.g. `--user u --pass p`).
    pub fn start(extra: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = Self {
            child: None,
            port,
            args: extra.iter().map(|s| s.to_string()).collect(),
        };
        server.restart();
        server
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills it (the clients see their connection drop).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and waits until it accepts.
    pub fn restart(&mut self) {
        self.kill();
        let child = Command::new(binary())
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string()])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server is installed (scripts/test.sh installs it)");
        self.child = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(self.address()).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "nats-server did not start"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The flags `switchyard worker` needs for a carrier set: on `nats` (a
/// server given) its URL and a free loopback `--address` where the worker
/// serves its streams; on `tunnel` none.
pub fn worker_flags(nats: Option<&NatsServer>) -> Vec<String> {
    let Some(nats) = nats else {
        return Vec::new();
    };
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    vec![
        "--nats-url".into(),
        nats.address(),
        "--address".into(),
        format!("127.0.0.1:{port}"),
    ]
}
