//! `policy test --watch`: waits until a watched file has changed and stopped
//! changing. Polling the size and modification time is enough for a handful
//! of files and needs no platform notification API; waiting for two equal
//! readings in a row keeps a run from reading a component a build is still
//! writing.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How often the files are looked at.
const POLL: Duration = Duration::from_millis(250);

/// What identifies one version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
    })
}

pub struct Watcher {
    files: Vec<(PathBuf, Option<Stamp>)>,
}

impl Watcher {
    pub fn new(paths: Vec<PathBuf>) -> Self {
        let files = paths
            .into_iter()
            .map(|p| {
                let s = stamp(&p);
                (p, s)
            })
            .collect();
        Self { files }
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Blocks until a file differs from the last run's reading and then
    /// reads the same twice in a row; answers the first one that changed.
    pub fn wait_for_change(&mut self) -> PathBuf {
        loop {
            std::thread::sleep(POLL);
            let Some(i) = self.files.iter().position(|(p, s)| stamp(p) != *s) else {
                continue;
            };
            let mut last = stamp(&self.files[i].0);
            loop {
                std::thread::sleep(POLL);
                let now = stamp(&self.files[i].0);
                if now == last && now.is_some() {
                    break;
                }
                last = now;
            }
            for (path, s) in &mut self.files {
                *s = stamp(path);
            }
            return self.files[i].0.clone();
        }
    }
}
