//! Counters that tests and load tests read from `GET /stats`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The engine's counters.
#[derive(Debug, Default)]
pub struct Stats {
    requests: AtomicU64,
    in_flight: AtomicU64,
    completed: AtomicU64,
    cancelled: AtomicU64,
    rejected: AtomicU64,
    last_request: Mutex<Option<Value>>,
}

/// What `GET /stats` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// `POST /v1/*` requests received, valid or not.
    pub requests: u64,
    /// Requests admitted and not finished (a stream until its `[DONE]`).
    pub in_flight: u64,
    /// Requests answered in full.
    pub completed: u64,
    /// Requests whose client went away before the answer was complete;
    /// their generation stopped.
    pub cancelled: u64,
    /// Requests refused with 429 at `max_concurrency`.
    pub rejected: u64,
    /// The body of the last `POST /v1/*` request that was valid JSON, as
    /// received: what admission let through to the engine.
    pub last_request: Option<Value>,
}

impl Stats {
    /// Counts a request and keeps its body.
    pub fn received(&self, body: Option<Value>) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if let Some(body) = body {
            *self.last_request.lock().unwrap_or_else(|e| e.into_inner()) = Some(body);
        }
    }

    /// Counts a request admitted.
    pub fn started(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an admitted request finished, in full or not.
    pub fn finished(&self, completed: bool) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        let counter = if completed {
            &self.completed
        } else {
            &self.cancelled
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request refused at the concurrency limit.
    pub fn rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            completed: self.completed.load(Ordering::Relaxed),
            cancelled: self.cancelled.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            last_request: self
                .last_request
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}
