//! A progress bar on stderr for long transfers: `label [=====>    ] 45%
//! 123.4/274.0 MiB 210 MiB/s`, redrawn at most ten times a second, and a
//! plain line per update when stderr is not a terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

const REDRAW: Duration = Duration::from_millis(100);
const WIDTH: usize = 30;

/// One transfer's progress.
pub struct Progress {
    label: String,
    total: u64,
    done: u64,
    started: Instant,
    drawn: Option<Instant>,
    terminal: bool,
}

impl Progress {
    /// A bar for `total` bytes.
    pub fn new(label: &str, total: u64) -> Self {
        Self {
            label: label.to_string(),
            total,
            done: 0,
            started: Instant::now(),
            drawn: None,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    /// `n` more bytes are done.
    pub fn advance(&mut self, n: u64) {
        self.done += n;
        if self.drawn.is_none_or(|at| at.elapsed() >= REDRAW) && self.terminal {
            self.draw("\r");
        }
    }

    /// The transfer ended; the final line stays.
    pub fn finish(mut self, outcome: &str) {
        self.draw(if self.terminal { "\r" } else { "" });
        eprintln!(" {outcome}");
    }

    fn draw(&mut self, start: &str) {
        let fraction = if self.total == 0 {
            1.0
        } else {
            self.done as f64 / self.total as f64
        };
        let filled = ((fraction * WIDTH as f64) as usize).min(WIDTH);
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let rate = mib(self.done) / self.started.elapsed().as_secs_f64().max(1e-3);
        eprint!(
            "{start}{} [{}{}] {:>3.0}% {:.1}/{:.1} MiB {:.0} MiB/s",
            self.label,
            "=".repeat(filled),
            " ".repeat(WIDTH - filled),
            fraction * 100.0,
            mib(self.done),
            mib(self.total),
            rate
        );
        let _ = std::io::stderr().flush();
        self.drawn = Some(Instant::now());
    }
}
