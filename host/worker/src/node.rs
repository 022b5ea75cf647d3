//! What a worker serves beyond the basics: its placement cache and engines,
//! through control verbs (`files.status`, `files.delete`, `engine.start`,
//! `engine.stop`, `engine.drain`, `engine.list`) and two stream services:
//! `blob` (one range of a model file, bulk lane) and `inference` (an HTTP
//! request to one of its engines, answered as the engine streams).
//!
//! A stream service's request starts with one JSON line; `blob` answers one
//! JSON line, `inference` a JSON head line (`{status, headers}`) and then
//! the engine's body as it comes.
//!
//! Whoever reaches these verbs and services does not choose what runs: an
//! `engine.start` is parsed under the worker's [`EngineStartPolicy`] (see
//! [`start`]) and an `inference` head must name a `/v1/` path (see [`head`]).

mod answer;
mod head;
mod relay;
pub mod start;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use serde::Deserialize;
use switchyard_carrier::control::{ControlHandler, ControlRefusal};
use switchyard_carrier::stream_seam::Acceptor;
use switchyard_carrier::{Stream, StreamReader};
use switchyard_protocol::control::{
    EngineAnswer, EngineRef, FileRef, FileStatus, FilesDeleted, verbs,
};
use switchyard_protocol::engines::EngineReport;
use switchyard_protocol::limits::MAX_HEAD;
use switchyard_protocol::stream::{BLOB, BlobAnswer, BlobHead, BlobRefusal, INFERENCE};

use crate::engines::{Engine, EngineBinaries, EngineSpec};
use crate::placement::Placement;
use crate::services;
pub use start::EngineStartPolicy;

/// How long a drain waits when the caller names no deadline.
const DEFAULT_DRAIN: Duration = Duration::from_secs(60);
/// Heartbeat answers in a row that must leave an engine out before the
/// worker stops it. The frontend writes a replica's row before it starts the
/// engine, so a running engine is left out only when its replica is gone
/// (deleted, or forgotten after a stop that never got here); more than one
/// answer rules out one computed just before the row was written.
pub const UNKNOWN_ENGINE_GRACE_BEATS: u32 = 3;

/// A worker's cache and engines.
pub struct Node {
    placement: Placement,
    binaries: EngineBinaries,
    policy: EngineStartPolicy,
    engines: Mutex<HashMap<String, Arc<Engine>>>,
    /// Engines the last heartbeat answers left out, and how many in a row.
    unknown: Mutex<HashMap<String, u32>>,
    http: reqwest::Client,
    /// Where the inference streams' spans go (`--otlp-endpoint`).
    tracer: std::sync::OnceLock<Arc<switchyard_telemetry::Tracer>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").finish_non_exhaustive()
    }
}

fn refusal(code: &str, message: impl std::fmt::Display) -> ControlRefusal {
    ControlRefusal::new(code, message.to_string())
}

fn parse<T: for<'de> Deserialize<'de>>(payload: &[u8]) -> Result<T, ControlRefusal> {
    serde_json::from_slice(payload).map_err(|e| refusal("invalid_request", e))
}

/// A verb's answer as its JSON bytes.
fn answer(value: &impl serde::Serialize) -> Result<Bytes, ControlRefusal> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| refusal("internal", e))
}

impl Node {
    /// A node over its cache, starting engines from `binaries` as `policy`
    /// allows.
    pub fn new(
        placement: Placement,
        binaries: EngineBinaries,
        policy: EngineStartPolicy,
    ) -> Arc<Self> {
        Arc::new(Self {
            placement,
            binaries,
            policy,
            engines: Mutex::new(HashMap::new()),
            unknown: Mutex::new(HashMap::new()),
            http: reqwest::Client::new(),
            tracer: std::sync::OnceLock::new(),
        })
    }

    /// Exports a span for each inference stream, and one for its call to
    /// the engine, to `tracer` (set once).
    pub fn trace_to(&self, tracer: Arc<switchyard_telemetry::Tracer>) {
        let _ = self.tracer.set(tracer);
    }

    /// The placement cache.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The engines, with their state, for heartbeats and `engine.list`.
    pub fn engines(&self) -> Vec<EngineReport> {
        let engines = self.engines.lock().expect("engines lock");
        let mut list: Vec<EngineReport> = engines
            .values()
            .map(|e| EngineReport {
                id: e.spec().id.clone(),
                kind: e.spec().kind,
                model: e.spec().served_model_name.clone(),
                gpus: e.spec().gpus.clone(),
                state: e.state(),
                restarts: e.restarts(),
                url: e.url(),
                in_flight: e.in_flight(),
            })
            .collect();
        list.sort_by(|a, b| a.id.cmp(&b.id));
        list
    }

    /// Hears the engine ids the cluster knows on this node (a heartbeat's
    /// answer): an engine left out of [`UNKNOWN_ENGINE_GRACE_BEATS`] answers
    /// in a row is stopped, in the background. Returns the ids stopped now.
    pub fn stop_unknown(&self, known: &[String]) -> Vec<String> {
        let mut engines = self.engines.lock().expect("engines lock");
        let mut unknown = self.unknown.lock().expect("unknown lock");
        unknown.retain(|id, _| engines.contains_key(id) && !known.contains(id));
        let mut doomed = Vec::new();
        for id in engines.keys().filter(|id| !known.contains(id)) {
            let missed = unknown.entry(id.clone()).or_default();
            *missed += 1;
            if *missed >= UNKNOWN_ENGINE_GRACE_BEATS {
                doomed.push(id.clone());
            }
        }
        for id in &doomed {
            unknown.remove(id);
            if let Some(engine) = engines.remove(id) {
                tracing::warn!(engine = %id, "no replica names this engine any more; stopping it");
                tokio::spawn(async move { engine.stop().await });
            }
        }
        doomed
    }

    fn engine(&self, id: &str) -> Option<Arc<Engine>> {
        self.engines.lock().expect("engines lock").get(id).cloned()
    }

    /// Every control verb: this node's and the basic ones.
    pub fn control(self: &Arc<Self>) -> ControlHandler {
        let node = self.clone();
        let basic = services::control_verbs();
        Arc::new(move |verb: String, payload: Bytes| {
            let (node, basic) = (node.clone(), basic.clone());
            Box::pin(async move {
                match verb.as_str() {
                    verbs::FILES_STATUS => {
                        let files: Vec<FileRef> = parse(&payload)?;
                        let states: Vec<FileStatus> = files
                            .into_iter()
                            .map(|f| FileStatus {
                                state: node.placement.state(&f.sha256, f.size),
                                sha256: f.sha256,
                            })
                            .collect();
                        answer(&states)
                    }
                    verbs::FILES_DELETE => {
                        let digests: Vec<String> = parse(&payload)?;
                        for digest in &digests {
                            node.placement
                                .delete(digest)
                                .await
                                .map_err(|e| refusal("file_busy", e))?;
                        }
                        answer(&FilesDeleted {
                            deleted: digests.len(),
                        })
                    }
                    verbs::ENGINE_START => {
                        let spec = node
                            .policy
                            .parse(&payload, |sha256| node.placement.path(sha256))
                            .map_err(|e| refusal(e.code, e.message))?;
                        node.start_engine(spec)
                    }
                    verbs::ENGINE_STOP | verbs::ENGINE_DRAIN => {
                        let target: EngineRef = parse(&payload)?;
                        let engine = node
                            .engines
                            .lock()
                            .expect("engines lock")
                            .remove(&target.id)
                            .ok_or_else(|| {
                                refusal("unknown_engine", format!("no engine {}", target.id))
                            })?;
                        if verb == verbs::ENGINE_DRAIN {
                            let deadline = target
                                .deadline_ms
                                .map_or(DEFAULT_DRAIN, Duration::from_millis);
                            engine.drain(deadline).await;
                        } else {
                            engine.stop().await;
                        }
                        answer(&EngineAnswer {
                            id: target.id,
                            state: engine.state(),
                        })
                    }
                    verbs::ENGINE_LIST => answer(&node.engines()),
                    _ => basic(verb, payload).await,
                }
            })
        })
    }

    fn start_engine(&self, spec: EngineSpec) -> Result<Bytes, ControlRefusal> {
        let mut engines = self.engines.lock().expect("engines lock");
        if let Some(running) = engines.get(&spec.id) {
            if running.spec() == &spec {
                return answer(&EngineAnswer {
                    id: spec.id,
                    state: running.state(),
                });
            }
            return Err(refusal(
                "engine_exists",
                format!("engine {} runs another spec", spec.id),
            ));
        }
        if !spec.model_path.exists() {
            return Err(refusal(
                "model_missing",
                format!("{} is not on this worker", spec.model_path.display()),
            ));
        }
        let engine = Engine::start(spec.clone(), self.binaries.clone())
            .map_err(|e| refusal("engine_failed", e))?;
        let state = engine.state();
        engines.insert(spec.id.clone(), Arc::new(engine));
        answer(&EngineAnswer { id: spec.id, state })
    }

    /// Every stream service: this node's and the basic ones.
    pub fn acceptor(self: &Arc<Self>) -> Acceptor {
        self.acceptor_counted(services::InFlight::default())
    }

    /// [`Node::acceptor`], counting each stream in `in_flight` until its
    /// service ends (what runs on one carrier set).
    pub fn acceptor_counted(self: &Arc<Self>, in_flight: services::InFlight) -> Acceptor {
        let runtime = tokio::runtime::Handle::current();
        let control = self.control();
        let basic = services::acceptor_counted(control.clone(), in_flight.clone());
        let node = self.clone();
        Arc::new(move |service: &str, stream: Stream| match service {
            BLOB => {
                runtime.spawn(in_flight.counted(node.clone().serve_blob(stream)));
                Ok(())
            }
            INFERENCE => {
                runtime.spawn(in_flight.counted(node.clone().serve_inference(stream)));
                Ok(())
            }
            // `control` (with this node's verbs), `echo`, `sink`, `source`.
            _ => basic(service, stream),
        })
    }

    async fn serve_blob(self: Arc<Self>, stream: Stream) {
        let Stream {
            mut reader,
            mut writer,
        } = stream;
        let invalid = |message: String| BlobAnswer::Refused {
            error: BlobRefusal {
                code: "invalid_request".into(),
                message,
                state: None,
            },
        };
        let answer = match read_head(&mut reader).await {
            Err(e) => invalid(e),
            Ok((head, rest)) => match serde_json::from_slice::<BlobHead>(&head) {
                Err(e) => invalid(e.to_string()),
                Ok(range) => {
                    let received = self
                        .placement
                        .receive(
                            &range.sha256,
                            range.size,
                            range.offset,
                            range.length,
                            chunks(rest, &mut reader),
                        )
                        .await;
                    // The sender's end: read it, so the stream closes cleanly.
                    while let Some(Ok(_)) = reader.read().await {}
                    match received {
                        Ok((offset, complete)) => BlobAnswer::Received { offset, complete },
                        Err(e) => BlobAnswer::Refused {
                            error: BlobRefusal {
                                code: "placement".into(),
                                message: e.to_string(),
                                state: Some(self.placement.state(&range.sha256, range.size)),
                            },
                        },
                    }
                }
            },
        };
        let answer = serde_json::to_vec(&answer).unwrap_or_default();
        let _ = writer.write(Bytes::from(answer)).await;
        writer.finish();
    }
}

/// The request's first line, and what came after it in the same chunk.
pub(super) async fn read_head(reader: &mut StreamReader) -> Result<(Vec<u8>, Bytes), String> {
    reader.read_line(MAX_HEAD).await.map_err(|e| e.to_string())
}

/// `first`, then the rest of the stream, as the placement cache reads it.
fn chunks(
    first: Bytes,
    reader: &mut StreamReader,
) -> impl futures::Stream<Item = Result<Bytes, String>> + Unpin + '_ {
    let first = futures::stream::iter((!first.is_empty()).then_some(Ok(first)));
    let rest = futures::stream::unfold(reader, |reader| async move {
        let chunk = reader.read().await?;
        Some((chunk.map_err(|e| e.to_string()), reader))
    });
    Box::pin(first.chain(rest))
}

#[cfg(test)]
mod unknown_engine_tests {
    use serde_json::json;

    use super::*;

    /// A node with engines `ids` supervised (their program need not exist:
    /// a supervised engine that cannot start keeps restarting).
    fn node_with(ids: &[&str]) -> (Arc<Node>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let placement = Placement::open(&dir.path().join("models"), 0).unwrap();
        let binaries = EngineBinaries {
            switchyard: dir.path().join("absent"),
            llama_server: dir.path().join("absent"),
            python: dir.path().join("absent"),
        };
        let node = Node::new(placement, binaries.clone(), EngineStartPolicy::default());
        for id in ids {
            let spec: EngineSpec = serde_json::from_value(json!({
                "id": id, "kind": "reference", "model_path": dir.path().join("m.gguf"),
                "served_model_name": "m", "gpus": [0],
            }))
            .unwrap();
            let engine = Engine::start(spec, binaries.clone()).unwrap();
            node.engines
                .lock()
                .unwrap()
                .insert(id.to_string(), Arc::new(engine));
        }
        (node, dir)
    }

    fn running(node: &Node) -> Vec<String> {
        let mut ids: Vec<String> = node.engines.lock().unwrap().keys().cloned().collect();
        ids.sort();
        ids
    }

    #[tokio::test]
    async fn an_engine_no_answer_names_is_stopped_after_the_grace() {
        let (node, _dir) = node_with(&["rep_known", "rep_gone"]);
        let known = vec!["rep_known".to_string()];
        for _ in 1..UNKNOWN_ENGINE_GRACE_BEATS {
            assert!(node.stop_unknown(&known).is_empty());
        }
        assert_eq!(running(&node), ["rep_gone", "rep_known"]);
        assert_eq!(node.stop_unknown(&known), ["rep_gone"]);
        assert_eq!(running(&node), ["rep_known"]);
    }

    #[tokio::test]
    async fn an_answer_that_names_the_engine_again_restarts_the_grace() {
        let (node, _dir) = node_with(&["rep_late"]);
        let none: Vec<String> = Vec::new();
        let late = vec!["rep_late".to_string()];
        // One answer computed before the replica's row was written leaves it
        // out; the next names it: the count starts again.
        for _ in 1..UNKNOWN_ENGINE_GRACE_BEATS {
            assert!(node.stop_unknown(&none).is_empty());
        }
        assert!(node.stop_unknown(&late).is_empty());
        for _ in 1..UNKNOWN_ENGINE_GRACE_BEATS {
            assert!(node.stop_unknown(&none).is_empty());
        }
        assert_eq!(running(&node), ["rep_late"]);
    }
}

#[cfg(test)]
mod start_tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn engine_start_through_the_control_verbs_obeys_the_workers_policy() {
        let dir = tempfile::tempdir().unwrap();
        let placement = Placement::open(&dir.path().join("models"), 0).unwrap();
        let node = Node::new(
            placement,
            EngineBinaries::default(),
            EngineStartPolicy::default(),
        );
        let control = node.control();
        let refused = control(
            "engine.start".into(),
            Bytes::from(
                json!({
                    "id": "r1", "kind": "reference", "served_model_name": "m",
                    "model_sha256": "ab".repeat(32),
                    "env": {"LD_PRELOAD": dir.path().join("models/blobs/sha256/evil.so")},
                })
                .to_string(),
            ),
        )
        .await
        .unwrap_err();
        assert_eq!(refused.code, "not_allowed", "{}", refused.message);
        let refused = control(
            "engine.start".into(),
            Bytes::from(
                json!({"id": "r1", "kind": "reference", "served_model_name": "m",
                    "model_path": "/bin/sh"})
                .to_string(),
            ),
        )
        .await
        .unwrap_err();
        assert_eq!(refused.code, "not_allowed", "{}", refused.message);
        assert!(node.engines().is_empty());
    }
}
