//! Where we stand beside our anchors: each section that measures one of
//! the performance issue's rows records it here (ours, the anchor measured
//! in the same run, the ratio and the aim), and `main` prints them together
//! after the sections ran. `switchyard-bench anchors` runs exactly those
//! sections.

use std::sync::Mutex;

/// The sections that record a row, in the table's order.
pub const SECTIONS: [&str; 4] = ["nats", "pgbus", "proxy", "tunnel"];

/// Which way a ratio must go to meet its aim.
#[derive(Debug, Clone, Copy)]
pub enum Aim {
    /// The ratio is at least this (ours / anchor, more is better).
    AtLeast(f64),
    /// The ratio is at most this (ours / anchor, less is better).
    AtMost(f64),
}

impl Aim {
    fn met(self, ratio: f64) -> bool {
        match self {
            Aim::AtLeast(aim) => ratio >= aim,
            Aim::AtMost(aim) => ratio <= aim,
        }
    }
}

impl std::fmt::Display for Aim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Aim::AtLeast(aim) => write!(f, ">= {aim}"),
            Aim::AtMost(aim) => write!(f, "<= {aim}"),
        }
    }
}

/// One row: what was measured, our figure, the anchor's, their ratio.
#[derive(Debug, Clone)]
pub struct Row {
    pub what: String,
    pub ours: String,
    pub anchor: String,
    pub ratio: f64,
    pub aim: Aim,
}

static ROWS: Mutex<Vec<Row>> = Mutex::new(Vec::new());

/// Records a row for the closing table.
pub fn record(row: Row) {
    ROWS.lock().expect("anchors lock").push(row);
}

/// Prints the recorded rows, if any, as one table.
pub fn print() {
    let rows = std::mem::take(&mut *ROWS.lock().expect("anchors lock"));
    if rows.is_empty() {
        return;
    }
    crate::stats::header(
        "Beside the anchors (this run)",
        &["what", "ours", "anchor", "ratio", "aim", "met"],
    );
    for row in &rows {
        println!(
            "| {} | {} | {} | {:.2} | {} | {} |",
            row.what,
            row.ours,
            row.anchor,
            row.ratio,
            row.aim,
            if row.aim.met(row.ratio) { "yes" } else { "no" }
        );
    }
    println!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aims_compare_the_right_way() {
        assert!(Aim::AtLeast(0.8).met(0.8));
        assert!(!Aim::AtLeast(0.8).met(0.79));
        assert!(Aim::AtMost(1.2).met(1.2));
        assert!(!Aim::AtMost(1.2).met(1.21));
    }
}
