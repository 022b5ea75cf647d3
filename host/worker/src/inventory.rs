//! What the machine reports with its registration and heartbeats: CPUs,
//! memory (total and available), the disk under the data directory, and
//! GPUs (NVML, nvidia-smi or a declared inventory; see `switchyard-gpu`).

use std::path::Path;

use switchyard_protocol::node::{Disk, Inventory};

/// The machine now, with the GPUs found at start (no engines: the caller
/// adds them to a heartbeat's).
pub fn collect(gpus: &switchyard_gpu::Inventory, data_dir: &Path) -> Inventory {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map(|kib| kib * 1024)
    };
    let disk = crate::placement::disk_space(data_dir)
        .ok()
        .map(|(total_bytes, available_bytes)| Disk {
            total_bytes,
            available_bytes,
        });
    Inventory {
        hostname: hostname(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        memory_bytes: field("MemTotal:"),
        memory_available_bytes: field("MemAvailable:"),
        disk,
        gpu_source: gpus.source,
        gpus: gpus.gpus.clone(),
        engines: None,
    }
}

/// The machine's host name.
pub fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".into())
}
