//! CPU time of processes, from `/proc/<pid>/stat`.

use std::process::Command;

/// The fields after the command name of a `/proc/<pid>/stat` line (state first).
pub(crate) fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().collect())
}

/// utime + stime of a process, in clock ticks (all its threads).
pub(crate) fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("a process's stat");
    let fields = stat_fields(&stat).expect("a stat line");
    // Fields 14 and 15 of proc(5); the list starts at field 3.
    let utime: u64 = fields[11].parse().expect("utime");
    let stime: u64 = fields[12].parse().expect("stime");
    utime + stime
}

pub(crate) fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}
