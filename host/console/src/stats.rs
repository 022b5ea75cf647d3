//! Requests and errors per second for the overview's chart, sampled from
//! this replica's own `/v1` counters (the ones `/metrics` exports).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchyard_server::state::AppState;

/// How often the counters are read.
pub const EVERY: Duration = Duration::from_secs(2);
/// How many rates are kept (two minutes).
const KEPT: usize = 60;

/// One interval's rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Answers per second.
    pub requests: f64,
    /// Answers with a status of 400 or more, per second.
    pub errors: f64,
}

/// The newest rates, oldest first.
#[derive(Debug, Clone, Default)]
pub struct Rates(Arc<Mutex<VecDeque<Rate>>>);

impl Rates {
    /// Every kept rate, oldest first.
    pub fn all(&self) -> Vec<Rate> {
        self.0.lock().expect("rates lock").iter().copied().collect()
    }

    fn push(&self, rate: Rate) {
        let mut rates = self.0.lock().expect("rates lock");
        if rates.len() == KEPT {
            rates.pop_front();
        }
        rates.push_back(rate);
    }
}

/// Samples `app`'s counters into `rates` every [`EVERY`] while the replica runs.
pub fn sample(app: Arc<AppState>, rates: Rates) {
    let weak = Arc::downgrade(&app);
    drop(app);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last: Option<(u64, u64, tokio::time::Instant)> = None;
        loop {
            tick.tick().await;
            // The replica is gone (its state dropped): so is the sampler.
            let Some(app) = weak.upgrade() else { return };
            let (requests, errors) = app.inference.metrics.totals();
            let now = tokio::time::Instant::now();
            if let Some((r, e, at)) = last {
                let seconds = now.duration_since(at).as_secs_f64().max(0.001);
                rates.push(Rate {
                    requests: requests.saturating_sub(r) as f64 / seconds,
                    errors: errors.saturating_sub(e) as f64 / seconds,
                });
            }
            last = Some((requests, errors, now));
        }
    });
}
