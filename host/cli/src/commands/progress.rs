//! A progress bar on stderr for long transfers: `label [=====>    ] 45%
//! 123.4/274.0 MiB 210 MiB/s`, redrawn at most ten times a second; when
//! stderr is not a terminal, only the final line.

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
        self.set(self.done + n);
    }

    /// `done` bytes are done in all (another party counts them).
    pub fn set(&mut self, done: u64) {
        self.done = done;
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
        let rate = mib(self.done) / self.started.elapsed().as_secs_f64().max(1e-3);
        eprint!(
            "{start}{} {} {rate:.0} MiB/s",
            self.label,
            bar(self.done, self.total)
        );
        let _ = std::io::stderr().flush();
        self.drawn = Some(Instant::now());
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// `[=====     ]  45% 123.4/274.0 MiB`; only the MiB when the total is
/// unknown (0) and something is done.
pub fn bar(done: u64, total: u64) -> String {
    if total == 0 && done > 0 {
        return format!("{:.1} MiB", mib(done));
    }
    let fraction = if total == 0 {
        1.0
    } else {
        (done as f64 / total as f64).min(1.0)
    };
    let filled = ((fraction * WIDTH as f64) as usize).min(WIDTH);
    format!(
        "[{}{}] {:>3.0}% {:.1}/{:.1} MiB",
        "=".repeat(filled),
        " ".repeat(WIDTH - filled),
        fraction * 100.0,
        mib(done),
        mib(total)
    )
}

#[cfg(test)]
mod tests {
    use super::bar;

    #[test]
    fn bars_fill_with_the_fraction_done() {
        assert_eq!(
            bar(3 << 20, 4 << 20),
            format!("[{}{}]  75% 3.0/4.0 MiB", "=".repeat(22), " ".repeat(8))
        );
        assert_eq!(bar(0, 0), format!("[{}] 100% 0.0/0.0 MiB", "=".repeat(30)));
        assert_eq!(bar(5 << 20, 0), "5.0 MiB");
    }
}
