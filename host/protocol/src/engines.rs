//! Engines as the frontend and the worker speak of them: the kinds, where
//! one is, and the report of one in a heartbeat and in `engine.list`.

use serde::{Deserialize, Serialize};

text_enum! {
    /// Which inference server runs a replica.
    pub enum EngineKind {
        /// Switchyard's own OpenAI-compatible engine (deterministic, no GPU).
        Reference => "reference",
        /// llama.cpp's `llama-server`.
        LlamaCpp => "llama-cpp",
        /// vLLM's OpenAI server.
        Vllm => "vllm",
    }
}

/// Where an engine is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EngineState {
    /// Started, not healthy yet.
    Starting,
    /// Serving.
    Ready {
        /// The process id.
        pid: u32,
    },
    /// It exited; it starts again after a delay.
    Restarting {
        /// Restarts so far.
        attempt: u32,
        /// How it ended.
        reason: String,
        /// The delay before the next start.
        retry_in_ms: u64,
    },
    /// No new requests; waiting for those in flight.
    Draining,
    /// Stopped for good.
    Stopped {
        /// Why.
        reason: String,
    },
}

impl EngineState {
    /// `starting`, `ready`, `restarting`, `draining` or `stopped`.
    pub fn name(&self) -> &'static str {
        match self {
            EngineState::Starting => "starting",
            EngineState::Ready { .. } => "ready",
            EngineState::Restarting { .. } => "restarting",
            EngineState::Draining => "draining",
            EngineState::Stopped { .. } => "stopped",
        }
    }
}

/// One engine on a worker, as its heartbeats and `engine.list` report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineReport {
    /// The replica's id.
    pub id: String,
    /// The engine.
    pub kind: EngineKind,
    /// The model id it serves.
    pub model: String,
    /// GPU indices it is pinned to.
    #[serde(default)]
    pub gpus: Vec<u32>,
    /// Where it is.
    pub state: EngineState,
    /// Restarts so far.
    #[serde(default)]
    pub restarts: u32,
    /// Where it listens, local to the worker: for an operator on that machine.
    pub url: String,
    /// Requests it serves now.
    #[serde(default)]
    pub in_flight: usize,
}

impl EngineReport {
    /// Whether the engine may still hold its GPUs (anything but stopped).
    pub fn holds_gpus(&self) -> bool {
        !matches!(self.state, EngineState::Stopped { .. })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;
    use crate::round_trip;

    pub(crate) fn report(id: &str, state: EngineState) -> EngineReport {
        EngineReport {
            id: id.into(),
            kind: EngineKind::LlamaCpp,
            model: "tiny".into(),
            gpus: vec![0, 1],
            state,
            restarts: 2,
            url: "http://127.0.0.1:9000".into(),
            in_flight: 3,
        }
    }

    #[test]
    fn kinds_round_trip_under_their_stable_names() {
        for kind in EngineKind::ALL {
            assert_eq!(round_trip(kind), kind.as_str());
        }
        assert_eq!(EngineKind::LlamaCpp.as_str(), "llama-cpp");
    }

    #[test]
    fn each_engine_state_round_trips_tagged_by_state() {
        let states = [
            EngineState::Starting,
            EngineState::Ready { pid: 7 },
            EngineState::Restarting {
                attempt: 1,
                reason: "exit 1".into(),
                retry_in_ms: 500,
            },
            EngineState::Draining,
            EngineState::Stopped {
                reason: "stopped".into(),
            },
        ];
        for state in states {
            assert_eq!(round_trip(&state)["state"], state.name());
        }
    }

    #[test]
    fn an_engine_report_round_trips() {
        let json = round_trip(&report("rep_1", EngineState::Ready { pid: 7 }));
        assert_eq!(json["state"], json!({"state": "ready", "pid": 7}));
        assert!(report("r", EngineState::Draining).holds_gpus());
        let stopped = EngineState::Stopped { reason: "x".into() };
        assert!(!report("r", stopped).holds_gpus());
    }
}
