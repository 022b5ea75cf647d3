//! What a worker serves beyond the basics: its placement cache and engines,
//! through control verbs (`files.status`, `files.delete`, `engine.start`,
//! `engine.stop`, `engine.drain`, `engine.list`) and two stream services:
//! `blob` (one range of a model file, bulk lane) and `inference` (an HTTP
//! request to one of its engines, answered as the engine streams).
//!
//! A stream service's request starts with one JSON line; `blob` answers one
//! JSON line, `inference` a JSON head line (`{status, headers}`) and then
//! the engine's body as it comes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{FutureExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use switchyard_carrier::control::{ControlHandler, ControlRefusal};
use switchyard_carrier::streams::Acceptor;
use switchyard_carrier::{Stream, StreamReader};

use crate::engines::{Engine, EngineBinaries, EngineSpec, EngineState};
use crate::placement::Placement;
use crate::services;

/// The longest first line of a stream request.
const MAX_HEAD: usize = 64 * 1024;
/// The most of an engine's answer gathered into one stream write.
const COALESCE_LIMIT: usize = 64 * 1024;
/// How long a drain waits when the caller names no deadline.
const DEFAULT_DRAIN: Duration = Duration::from_secs(60);

/// A worker's cache and engines.
pub struct Node {
    placement: Placement,
    binaries: EngineBinaries,
    engines: Mutex<HashMap<String, Arc<Engine>>>,
    http: reqwest::Client,
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

#[derive(Deserialize)]
struct FileRef {
    sha256: String,
    size: u64,
}

#[derive(Deserialize)]
struct EngineRef {
    id: String,
    #[serde(default)]
    deadline_ms: Option<u64>,
}

impl Node {
    /// A node over its cache, starting engines from `binaries`.
    pub fn new(placement: Placement, binaries: EngineBinaries) -> Arc<Self> {
        Arc::new(Self {
            placement,
            binaries,
            engines: Mutex::new(HashMap::new()),
            http: reqwest::Client::new(),
        })
    }

    /// The placement cache.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The engines, with their state, for heartbeats and `engine.list`.
    pub fn engines(&self) -> Vec<Value> {
        let engines = self.engines.lock().expect("engines lock");
        let mut list: Vec<Value> = engines
            .values()
            .map(|e| {
                json!({
                    "id": e.spec().id,
                    "kind": e.spec().kind,
                    "model": e.spec().served_model_name,
                    "gpus": e.spec().gpus,
                    "state": e.state(),
                    "restarts": e.restarts(),
                    // Local to the worker: for an operator on that machine.
                    "url": e.url(),
                    "in_flight": e.in_flight(),
                })
            })
            .collect();
        list.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        list
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
                    "files.status" => {
                        let files: Vec<FileRef> = parse(&payload)?;
                        let states: Vec<Value> = files
                            .iter()
                            .map(|f| json!({"sha256": f.sha256, "state": node.placement.state(&f.sha256, f.size)}))
                            .collect();
                        Ok(Bytes::from(json!(states).to_string()))
                    }
                    "files.delete" => {
                        let digests: Vec<String> = parse(&payload)?;
                        for digest in &digests {
                            node.placement
                                .delete(digest)
                                .await
                                .map_err(|e| refusal("file_busy", e))?;
                        }
                        Ok(Bytes::from(json!({"deleted": digests.len()}).to_string()))
                    }
                    "engine.start" => node.start_engine(node.resolve_model(parse(&payload)?)?),
                    "engine.stop" | "engine.drain" => {
                        let target: EngineRef = parse(&payload)?;
                        let engine = node
                            .engines
                            .lock()
                            .expect("engines lock")
                            .remove(&target.id)
                            .ok_or_else(|| {
                                refusal("unknown_engine", format!("no engine {}", target.id))
                            })?;
                        if verb == "engine.drain" {
                            let deadline = target
                                .deadline_ms
                                .map_or(DEFAULT_DRAIN, Duration::from_millis);
                            engine.drain(deadline).await;
                        } else {
                            engine.stop().await;
                        }
                        Ok(Bytes::from(
                            json!({"id": target.id, "state": engine.state()}).to_string(),
                        ))
                    }
                    "engine.list" => Ok(Bytes::from(json!(node.engines()).to_string())),
                    _ => basic(verb, payload).await,
                }
            })
        })
    }

    /// An engine spec that names its model by SHA-256 (`model_sha256`)
    /// runs the placement cache's verified copy.
    fn resolve_model(&self, mut request: Value) -> Result<EngineSpec, ControlRefusal> {
        if let Some(sha256) = request["model_sha256"].as_str() {
            let path = self.placement.path(sha256);
            if !path.is_file() {
                return Err(refusal(
                    "model_missing",
                    format!("file {sha256} is not in this worker's placement cache"),
                ));
            }
            request["model_path"] = json!(path);
        }
        serde_json::from_value(request).map_err(|e| refusal("invalid_request", e))
    }

    fn start_engine(&self, spec: EngineSpec) -> Result<Bytes, ControlRefusal> {
        let mut engines = self.engines.lock().expect("engines lock");
        if let Some(running) = engines.get(&spec.id) {
            if running.spec() == &spec {
                return Ok(Bytes::from(
                    json!({"id": spec.id, "state": running.state()}).to_string(),
                ));
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
        Ok(Bytes::from(
            json!({"id": spec.id, "state": state}).to_string(),
        ))
    }

    /// Every stream service: this node's and the basic ones.
    pub fn acceptor(self: &Arc<Self>) -> Acceptor {
        let runtime = tokio::runtime::Handle::current();
        let control = self.control();
        let basic = services::acceptor(control.clone());
        let node = self.clone();
        Arc::new(move |service: &str, stream: Stream| match service {
            "blob" => {
                runtime.spawn(node.clone().serve_blob(stream));
                Ok(())
            }
            "inference" => {
                runtime.spawn(node.clone().serve_inference(stream));
                Ok(())
            }
            // `control` (with this node's verbs), `echo`, `sink`, `source`.
            _ => basic(service, stream),
        })
    }

    async fn serve_blob(self: Arc<Self>, stream: Stream) {
        #[derive(Deserialize)]
        struct Range {
            sha256: String,
            size: u64,
            offset: u64,
            length: u64,
        }
        let Stream {
            mut reader,
            mut writer,
        } = stream;
        let answer = match read_head(&mut reader).await {
            Err(e) => json!({"error": {"code": "invalid_request", "message": e}}),
            Ok((head, rest)) => match serde_json::from_slice::<Range>(&head) {
                Err(e) => json!({"error": {"code": "invalid_request", "message": e.to_string()}}),
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
                        Ok((offset, complete)) => json!({"offset": offset, "complete": complete}),
                        Err(e) => json!({"error": {"code": "placement", "message": e.to_string(),
                            "state": self.placement.state(&range.sha256, range.size)}}),
                    }
                }
            },
        };
        let _ = writer.write(Bytes::from(answer.to_string())).await;
        writer.finish();
    }

    async fn serve_inference(self: Arc<Self>, stream: Stream) {
        #[derive(Deserialize)]
        struct Head {
            replica: String,
            method: String,
            path: String,
            #[serde(default)]
            headers: Vec<(String, String)>,
        }
        let Stream {
            mut reader,
            mut writer,
        } = stream;
        let fail = |status: u16, code: &str, message: String| {
            let head = json!({"status": status, "headers": [["content-type", "application/json"]]});
            let body = json!({"error": {"message": message, "type": code, "code": code}});
            Bytes::from(format!("{head}\n{body}"))
        };
        let (head, rest) = match read_head(&mut reader).await {
            Ok(head) => head,
            Err(e) => {
                let _ = writer.write(fail(400, "invalid_request", e)).await;
                return writer.finish();
            }
        };
        let head: Head = match serde_json::from_slice(&head) {
            Ok(head) => head,
            Err(e) => {
                let _ = writer
                    .write(fail(400, "invalid_request", e.to_string()))
                    .await;
                return writer.finish();
            }
        };
        let Some(engine) = self.engine(&head.replica) else {
            let _ = writer
                .write(fail(
                    503,
                    "replica_unavailable",
                    format!("no replica {} here", head.replica),
                ))
                .await;
            return writer.finish();
        };
        let Some(_in_flight) = engine.admit() else {
            let message = format!(
                "replica {} is {}",
                head.replica,
                state_name(&engine.state())
            );
            let _ = writer
                .write(fail(503, "replica_unavailable", message))
                .await;
            return writer.finish();
        };
        // The request body arrives whole before the engine is asked (OpenAI
        // requests are small); the answer streams.
        let mut body = BytesMut::from(&rest[..]);
        while let Some(chunk) = reader.read().await {
            match chunk {
                Ok(chunk) => body.extend_from_slice(&chunk),
                Err(_) => return,
            }
        }
        let method =
            reqwest::Method::from_bytes(head.method.as_bytes()).unwrap_or(reqwest::Method::POST);
        let mut request = self
            .http
            .request(method, format!("{}{}", engine.url(), head.path))
            .body(body.freeze());
        for (name, value) in &head.headers {
            request = request.header(name, value);
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                let _ = writer
                    .write(fail(502, "engine_failed", e.to_string()))
                    .await;
                return writer.finish();
            }
        };
        let headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .filter(|(name, _)| {
                // Hop-by-hop and length: the frontend frames its own answer.
                !matches!(
                    name.as_str(),
                    "content-length" | "transfer-encoding" | "connection"
                )
            })
            .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_string())))
            .collect();
        let head = json!({"status": response.status().as_u16(), "headers": headers});
        let mut out = BytesMut::from(format!("{head}\n").as_bytes());
        let mut body = response.bytes_stream();
        loop {
            // What the engine has ready goes in one message: the head with
            // the first bytes, and tokens that came together.
            let mut ended = false;
            while out.len() < COALESCE_LIMIT {
                match body.next().now_or_never() {
                    Some(Some(Ok(chunk))) => out.extend_from_slice(&chunk),
                    Some(Some(Err(_))) => return writer.reset(),
                    Some(None) => {
                        ended = true;
                        break;
                    }
                    None => break,
                }
            }
            // The frontend went away: dropping the response cancels the engine's work.
            if !out.is_empty() && writer.write(out.split().freeze()).await.is_err() {
                return;
            }
            if ended {
                break;
            }
            match body.next().await {
                Some(Ok(chunk)) => out.extend_from_slice(&chunk),
                Some(Err(_)) => return writer.reset(),
                None => break,
            }
        }
        writer.finish();
    }
}

fn state_name(state: &EngineState) -> &'static str {
    match state {
        EngineState::Starting => "starting",
        EngineState::Ready { .. } => "ready",
        EngineState::Restarting { .. } => "restarting",
        EngineState::Draining => "draining",
        EngineState::Stopped { .. } => "stopped",
    }
}

/// The request's first line, and what came after it in the same chunk.
async fn read_head(reader: &mut StreamReader) -> Result<(Vec<u8>, Bytes), String> {
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
