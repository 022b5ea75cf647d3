//! Routing beside nginx: CPU per request of each process on the path.
//!
//! `switchyard up` (tunnel set, no token delay) and, beside it, Debian's
//! nginx (one worker process, HTTP/1.1 keep-alive to its upstream) in front
//! of a second reference engine on the same model file. `wrk` drives each
//! with the same 16-token chat completion for a fixed time at 1 and 4
//! connections; utime + stime of every process (`/proc/<pid>/stat`) before
//! and after give its CPU microseconds per request. Ours makes two hops
//! (frontend, worker) where nginx makes one, so the aims are per process:
//! frontend and worker each at most 1.5x nginx's CPU per request, and at
//! least 0.5x nginx's requests per second. Beside both, the floor of our
//! HTTP stack (`floor_proxy`: the same libraries as a bare one-hop proxy)
//! shows how much of the ratio is the stack's before Switchyard does
//! anything.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::anchors;
use crate::cpu::{clock_ticks_per_second, cpu_ticks, stat_fields};
use crate::routing::{Killed, free_port, start};
use crate::stats::header;

/// How long each `wrk` run lasts.
const SECONDS: u64 = 10;
/// The connection counts measured.
const LEVELS: [usize; 2] = [1, 4];
/// The aim: each of our processes against nginx's CPU per request.
const CPU_AIM: f64 = 1.5;
/// The aim: our requests per second against nginx's.
const RATE_AIM: f64 = 0.5;

pub fn run() {
    let exe = std::env::current_exe().expect("current exe");
    let Some(bin) = prerequisites(&exe) else {
        return;
    };
    let cluster = start(&bin, None, 0);
    let up = cluster.up.0.id();
    let worker = child_named(up, "worker").expect("the `up` worker process");
    let engine = child_named(worker, "engine").expect("the worker's engine process");
    let direct_engine = cluster.engine.0.id();
    wait_healthy(&cluster.direct);
    let dir = tempfile::tempdir().expect("temp dir");
    let nginx_port = free_port();
    let upstream_port = cluster
        .direct
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .expect("the engine's port");
    let nginx = start_nginx(dir.path(), nginx_port, upstream_port);
    let nginx_worker = wait_for(|| child_named(nginx.0.id(), "nginx")).expect("nginx's worker");
    let floor_port = free_port();
    let floor = start_floor(&exe, floor_port, upstream_port);
    let ours_script = lua(dir.path(), "ours.lua", Some(&cluster.key));
    let nginx_script = lua(dir.path(), "nginx.lua", None);
    let paths = Paths {
        ours: Target {
            url: format!("{}/v1/chat/completions", cluster.frontend),
            script: ours_script,
            pids: vec![up, worker, engine],
        },
        nginx: Target {
            url: format!("http://127.0.0.1:{nginx_port}/v1/chat/completions"),
            script: nginx_script.clone(),
            pids: vec![nginx_worker, direct_engine],
        },
        floor: Target {
            url: format!("http://127.0.0.1:{floor_port}/v1/chat/completions"),
            script: nginx_script,
            pids: vec![floor.0.id()],
        },
    };
    wait_answering(&paths.ours.url, &cluster.key);
    wait_answering(&paths.nginx.url, "");
    wait_answering(&paths.floor.url, "");

    print_header();
    let mut all_met = true;
    for connections in LEVELS {
        all_met &= level(&paths, connections);
    }
    println!();
    println!(
        "aims {}: frontend and worker each <= {CPU_AIM}x nginx's CPU per request, req/s >= {RATE_AIM}x nginx's",
        if all_met { "met" } else { "not all met" }
    );
    println!(
        "floor: a one-hop proxy of axum and reqwest alone (the frontend's server, the worker's client), beside the same engine as nginx"
    );
    println!();
    drop(floor);
    drop(nginx);
    drop(cluster);
}

/// The `switchyard` binary beside this one, when it and the tools the run
/// needs are there; otherwise `None`, having said why the run is skipped.
fn prerequisites(exe: &Path) -> Option<PathBuf> {
    let bin = exe.with_file_name("switchyard");
    if !bin.is_file() {
        println!(
            "(skipping proxy: {} is not built; scripts/bench.sh builds it)",
            bin.display()
        );
        return None;
    }
    for tool in [nginx_bin(), "wrk"] {
        if !on_path(tool) {
            println!("(skipping proxy: no `{tool}`; scripts/bench.sh installs it)");
            return None;
        }
    }
    Some(bin)
}

/// The floor proxy (this binary in its `floor_proxy` mode) in front of the
/// engine nginx fronts.
fn start_floor(exe: &Path, port: u16, upstream: u16) -> Killed {
    Killed(
        Command::new(exe)
            .args([
                crate::floor_proxy::ARGUMENT,
                &format!("127.0.0.1:{port}"),
                &format!("127.0.0.1:{upstream}"),
            ])
            .spawn()
            .expect("the floor proxy"),
    )
}

/// The three paths measured side by side.
struct Paths {
    ours: Target,
    nginx: Target,
    floor: Target,
}

/// One path: where `wrk` sends, with which script, and the processes on
/// the path whose CPU is counted (the proxy first).
struct Target {
    url: String,
    script: PathBuf,
    pids: Vec<u32>,
}

impl Target {
    fn wrk(&self, connections: usize, seconds: u64) -> Done {
        wrk(&self.script, &self.url, connections, seconds)
    }

    fn measured(&self, connections: usize) -> Measured {
        measured(&self.pids, || self.wrk(connections, SECONDS))
    }
}

fn print_header() {
    header(
        "Routing beside nginx: 16-token chat completions, tunnel set, no token delay, wrk",
        &[
            "connections",
            "ours req/s",
            "nginx req/s",
            "ratio (aim >= 0.5)",
            "frontend us/req",
            "worker us/req",
            "engine behind worker us/req",
            "nginx us/req",
            "engine behind nginx us/req",
            "frontend/nginx (aim <= 1.5)",
            "worker/nginx (aim <= 1.5)",
            "floor req/s",
            "floor us/req",
            "floor/nginx",
        ],
    );
}

/// Measures the three paths at `connections`, prints the row and records
/// it beside its anchors: whether our path met the aims.
fn level(paths: &Paths, connections: usize) -> bool {
    // Warm each path (connections, caches, the routing table).
    paths.ours.wrk(connections, 1);
    paths.nginx.wrk(connections, 1);
    paths.floor.wrk(connections, 1);
    let ours = paths.ours.measured(connections);
    let theirs = paths.nginx.measured(connections);
    let bare = paths.floor.measured(connections);
    let rate_ratio = ours.rate / theirs.rate;
    let frontend = ours.cpu_us[0];
    let nginx_cpu = theirs.cpu_us[0];
    let (f_ratio, w_ratio) = (frontend / nginx_cpu, ours.cpu_us[1] / nginx_cpu);
    println!(
        "| {connections} | {:.0} | {:.0} | {rate_ratio:.2} | {frontend:.0} | {:.0} | {:.0} | {nginx_cpu:.0} | {:.0} | {f_ratio:.2} | {w_ratio:.2} | {:.0} | {:.0} | {:.2} |",
        ours.rate,
        theirs.rate,
        ours.cpu_us[1],
        ours.cpu_us[2],
        theirs.cpu_us[1],
        bare.rate,
        bare.cpu_us[0],
        bare.cpu_us[0] / nginx_cpu,
    );
    let what = |of: &str| format!("routing, {connections} connection(s): {of}");
    anchors::record(anchors::Row {
        what: what("throughput"),
        ours: format!("{:.0} req/s", ours.rate),
        anchor: format!("nginx {:.0} req/s", theirs.rate),
        ratio: rate_ratio,
        aim: anchors::Aim::AtLeast(RATE_AIM),
    });
    for (process, cpu, ratio) in [
        ("frontend", frontend, f_ratio),
        ("worker", ours.cpu_us[1], w_ratio),
    ] {
        anchors::record(anchors::Row {
            what: what(&format!("{process} CPU per request")),
            ours: format!("{cpu:.0} us"),
            anchor: format!("nginx {nginx_cpu:.0} us"),
            ratio,
            aim: anchors::Aim::AtMost(CPU_AIM),
        });
    }
    rate_ratio >= RATE_AIM && f_ratio <= CPU_AIM && w_ratio <= CPU_AIM
}

/// One timed run: requests per second and each process's CPU microseconds per request.
struct Measured {
    rate: f64,
    cpu_us: Vec<f64>,
}

fn measured(pids: &[u32], load: impl FnOnce() -> Done) -> Measured {
    let before: Vec<u64> = pids.iter().map(|&p| cpu_ticks(p)).collect();
    let done = load();
    let after: Vec<u64> = pids.iter().map(|&p| cpu_ticks(p)).collect();
    let tick_us = 1e6 / clock_ticks_per_second();
    let cpu_us = before
        .iter()
        .zip(&after)
        .map(|(b, a)| (a - b) as f64 * tick_us / done.requests as f64)
        .collect();
    Measured {
        rate: done.rate,
        cpu_us,
    }
}

/// What `wrk` reports of a run.
struct Done {
    requests: u64,
    rate: f64,
}

fn wrk(script: &Path, url: &str, connections: usize, seconds: u64) -> Done {
    let output = Command::new("wrk")
        .args(["-t", "1", "-c", &connections.to_string()])
        .args(["-d", &format!("{seconds}s")])
        .arg("-s")
        .arg(script)
        .arg(url)
        .output()
        .expect("wrk");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "wrk failed: {text}");
    // Every answer must be a success: a fast error would flatter the figures.
    assert!(
        !text.contains("Non-2xx") && !text.contains("Socket errors"),
        "wrk saw failures against {url}: {text}"
    );
    let requests = text
        .lines()
        .find_map(|l| {
            l.trim()
                .split_once(" requests in ")
                .map(|(n, _)| n.to_string())
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("wrk's request count in: {text}"));
    let rate = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|r| r.trim().parse().ok())
        .unwrap_or_else(|| panic!("wrk's rate in: {text}"));
    Done { requests, rate }
}

/// A `wrk` script that POSTs the chat completion.
fn lua(dir: &Path, name: &str, key: Option<&str>) -> PathBuf {
    let path = dir.join(name);
    let body = r#"{"model":"demo-tiny","max_tokens":16,"stream":false,"messages":[{"role":"user","content":"Tell me about switchyards."}]}"#;
    let mut script = format!(
        "wrk.method = \"POST\"\nwrk.body = '{body}'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"
    );
    if let Some(key) = key {
        script.push_str(&format!(
            "wrk.headers[\"Authorization\"] = \"Bearer {key}\"\n"
        ));
    }
    std::fs::write(&path, script).expect("the wrk script");
    path
}

/// nginx as a keep-alive reverse proxy, its files in `dir`.
fn start_nginx(dir: &Path, port: u16, upstream: u16) -> Killed {
    let d = dir.display();
    let config = format!(
        "worker_processes 1;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log error;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n\
           client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;\n\
           uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
           upstream engine {{ server 127.0.0.1:{upstream}; keepalive 16; }}\n\
           server {{\n    listen 127.0.0.1:{port};\n    location / {{\n\
               proxy_pass http://engine;\n      proxy_http_version 1.1;\n\
               proxy_set_header Connection \"\";\n    }}\n  }}\n}}\n"
    );
    let path = dir.join("nginx.conf");
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(config.as_bytes()))
        .expect("nginx.conf");
    let child: Child = Command::new(nginx_bin())
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&path)
        .stdout(Stdio::null())
        .spawn()
        .expect("nginx");
    Killed(child)
}

/// The first child of `parent` whose command line holds `word`.
fn child_named(parent: u32, word: &str) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid: u32 = stat_fields(&stat)?.get(1)?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline);
            (ppid == parent && cmdline.contains(word)).then_some(pid)
        })
}

/// Debian's nginx lives in /usr/sbin, off a user's PATH.
fn nginx_bin() -> &'static str {
    if on_path("nginx") {
        "nginx"
    } else {
        "/usr/sbin/nginx"
    }
}

fn on_path(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool} || test -x {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn wait_for<T>(mut found: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = found() {
            return Some(value);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_healthy(base: &str) {
    let http = reqwest::blocking::Client::new();
    let url = format!("{base}/health");
    wait_for(|| {
        http.get(&url)
            .send()
            .ok()
            .filter(|r| r.status().is_success())
    })
    .expect("the engine answers /health");
}

/// Polls until a chat completion through `url` succeeds (the deployment is up).
fn wait_answering(url: &str, key: &str) {
    let http = reqwest::blocking::Client::new();
    let body = serde_json::json!({
        "model": "demo-tiny", "max_tokens": 16,
        "messages": [{"role": "user", "content": "Tell me about switchyards."}],
    });
    wait_for(|| {
        let mut request = http.post(url).json(&body);
        if !key.is_empty() {
            request = request.bearer_auth(key);
        }
        request.send().ok().filter(|r| r.status().is_success())
    })
    .unwrap_or_else(|| panic!("{url} answers a chat completion"));
}
