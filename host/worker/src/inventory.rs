//! What the machine reports with its registration and heartbeats. GPUs
//! (NVML, nvidia-smi or a declared inventory) arrive with the engines work.

use serde_json::{Value, json};

/// CPUs, memory and the host name, read from the machine.
pub fn collect() -> Value {
    let memory_bytes = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map(|kib| kib * 1024);
    json!({
        "hostname": hostname(),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "memory_bytes": memory_bytes,
        "gpus": [],
    })
}

/// The machine's host name.
pub fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".into())
}
