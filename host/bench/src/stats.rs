//! Percentiles and table rows.

use std::time::Duration;

/// p50 and p99 of a set of samples, in microseconds.
pub fn percentiles(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    (at(0.50), at(0.99))
}

/// Times `f` `n` times, after a warm-up, one sample per call.
pub fn sample(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    for _ in 0..n / 10 {
        f();
    }
    (0..n)
        .map(|_| {
            let started = std::time::Instant::now();
            f();
            started.elapsed()
        })
        .collect()
}

/// Prints a section header.
pub fn header(title: &str, columns: &[&str]) {
    println!("## {title}");
    println!("| {} |", columns.join(" | "));
    println!("|{}", "---|".repeat(columns.len()));
}

/// The median of some figures (the upper one of an even count).
pub fn median(mut figures: Vec<f64>) -> f64 {
    figures.sort_by(f64::total_cmp);
    figures[figures.len() / 2]
}
