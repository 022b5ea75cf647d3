//! The session driver: owns the tunnel plugin instance (its calls are
//! synchronous) and the streams' state, and runs where [`Core`] lets it.
//! The websocket's reader hands it messages, stream handles hand it writes,
//! and it hands whole messages to the websocket's writer. Stream bodies
//! stay `Bytes` all the way: the plugin sees only headers.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use switchyard_runtime::tunnel::{self as plugin, Event, Step, TunnelPlugin};
use tokio::sync::{mpsc, oneshot, watch};

use super::Outbound;
use super::core::Core;
use crate::Refusal;
use crate::stream::{ConsumeSink, Stream, StreamError, StreamReader, StreamWriter, WriteSink};
use crate::stream_seam::{Acceptor, Lane};

/// What the driver thread hears.
pub(crate) enum Command {
    /// A websocket message arrived.
    Incoming(Bytes),
    /// The websocket ended.
    TransportClosed(String),
    /// Open a stream to the peer's service; with a request, send it
    /// behind the OPEN and finish.
    Open {
        service: String,
        request: Option<Bytes>,
        answer: oneshot::Sender<Result<Stream, Refusal>>,
    },
    Write {
        stream: u32,
        data: Bytes,
        done: oneshot::Sender<Result<(), StreamError>>,
    },
    Consumed {
        stream: u32,
        n: usize,
    },
    Finish(u32),
    Reset(u32),
    /// Keepalive: the plugin's timers.
    Tick,
}

/// One stream's host-side state.
#[derive(Default)]
struct Slot {
    /// Where incoming bytes go; `None` after the peer finished.
    inbound: Option<mpsc::UnboundedSender<Result<Bytes, StreamError>>>,
    /// Writes waiting for credit, in order.
    pending: VecDeque<(Bytes, oneshot::Sender<Result<(), StreamError>>)>,
    /// Finish once `pending` is written.
    finish_after: bool,
    /// Finished on this side.
    finished: bool,
    /// For a stream this side opened: who waits for the reply, and the
    /// stream to hand over on acceptance.
    opener: Option<(oneshot::Sender<Result<Stream, Refusal>>, Stream)>,
}

pub(crate) struct Driver {
    plugin: TunnelPlugin,
    /// Where the streams' handles send their commands.
    core: Weak<Core>,
    output: mpsc::UnboundedSender<Outbound>,
    acceptor: Acceptor,
    slots: HashMap<u32, Slot>,
    epoch: Instant,
    lost: watch::Sender<Option<String>>,
}

impl Driver {
    pub(crate) fn new(
        plugin: TunnelPlugin,
        core: Weak<Core>,
        output: mpsc::UnboundedSender<Outbound>,
        acceptor: Acceptor,
        epoch: Instant,
        lost: watch::Sender<Option<String>>,
    ) -> Self {
        Self {
            plugin,
            core,
            output,
            acceptor,
            slots: HashMap::new(),
            epoch,
            lost,
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// How long until the plugin's next timer.
    pub(crate) fn tick_wait(&mut self) -> Result<Duration, String> {
        match self.plugin.next_tick().map_err(trapped)? {
            Some(at) => Ok(Duration::from_millis(at.saturating_sub(self.now_ms()))),
            None => Ok(Duration::from_secs(3600)),
        }
    }

    /// Fails every stream and open; the websocket writer sees its channel
    /// close once the driver is dropped.
    pub(crate) fn end(&mut self, reason: &str) {
        for (_, slot) in self.slots.drain() {
            fail(slot, reason);
        }
        self.lost.send_replace(Some(reason.to_string()));
    }

    /// Runs one command; an `Err` ends the session.
    pub(crate) fn handle(&mut self, command: Command) -> Result<(), String> {
        match command {
            Command::Tick => {
                let step = self.plugin.tick(self.now_ms()).map_err(trapped)?;
                self.apply(step)
            }
            Command::Incoming(message) => self.incoming(message),
            Command::TransportClosed(reason) => Err(reason),
            Command::Open {
                service,
                request,
                answer,
            } => self.open(service, request, answer),
            Command::Write { stream, data, done } => {
                let Some(slot) = self.slots.get_mut(&stream) else {
                    let _ = done.send(Err(StreamError::Reset("the stream is gone".into())));
                    return Ok(());
                };
                if slot.finish_after || slot.finished {
                    let _ = done.send(Err(StreamError::Finished));
                    return Ok(());
                }
                slot.pending.push_back((data, done));
                self.pump(stream)
            }
            Command::Consumed { stream, n } => {
                if !self.slots.contains_key(&stream) {
                    return Ok(());
                }
                let n = u32::try_from(n).unwrap_or(u32::MAX);
                let step = self.plugin.consumed(stream, n).map_err(trapped)?;
                self.answered(stream, step)
            }
            Command::Finish(stream) => {
                if let Some(slot) = self.slots.get_mut(&stream) {
                    slot.finish_after = true;
                }
                self.pump(stream)
            }
            Command::Reset(stream) => {
                if let Some(slot) = self.slots.remove(&stream) {
                    fail(slot, "reset by this side");
                    let step = self.plugin.reset(stream).map_err(trapped)?;
                    self.answered(stream, step)?;
                }
                Ok(())
            }
        }
    }

    fn incoming(&mut self, mut message: Bytes) -> Result<(), String> {
        let now = self.now_ms();
        let body = match self.plugin.body_offset(&message) {
            Some(offset) => message.split_off(offset),
            None => Bytes::new(),
        };
        let body_len = u32::try_from(body.len()).map_err(|_| "message too large".to_string())?;
        let step = self
            .plugin
            .frame(&message, body_len, now)
            .map_err(trapped)?
            .map_err(|e| format!("protocol error: {e}"))?;
        let mut body = Some(body);
        self.write_frames(step.frames)?;
        for event in step.events {
            if let Event::Data(stream) = event {
                let chunk = body.take().unwrap_or_default();
                self.deliver(stream, chunk)?;
            } else {
                self.event(event)?;
            }
        }
        Ok(())
    }

    fn deliver(&mut self, stream: u32, chunk: Bytes) -> Result<(), String> {
        let len = chunk.len();
        let taken = self
            .slots
            .get(&stream)
            .and_then(|slot| slot.inbound.as_ref())
            .is_some_and(|inbound| inbound.send(Ok(chunk)).is_ok());
        if !taken && len > 0 {
            // Nobody reads: discard, but keep the peer's window moving.
            let n = u32::try_from(len).unwrap_or(u32::MAX);
            let step = self.plugin.consumed(stream, n).map_err(trapped)?;
            self.answered(stream, step)?;
        }
        Ok(())
    }

    fn open(
        &mut self,
        service: String,
        request: Option<Bytes>,
        answer: oneshot::Sender<Result<Stream, Refusal>>,
    ) -> Result<(), String> {
        let (id, step) = match self.plugin.open(&service).map_err(trapped)? {
            Ok(opened) => opened,
            Err(refusal) => {
                let _ = answer.send(Err(from_plugin(refusal)));
                return Ok(());
            }
        };
        let (slot_inbound, stream) = self.stream(id);
        let mut slot = Slot {
            inbound: Some(slot_inbound),
            opener: Some((answer, stream)),
            ..Slot::default()
        };
        if let Some(request) = request {
            // Nobody waits for this write: the reply or a reset answers.
            slot.pending.push_back((request, oneshot::channel().0));
            slot.finish_after = true;
        }
        self.slots.insert(id, slot);
        self.apply(step)?;
        self.pump(id)
    }

    /// A stream handle whose writes and credit come back to this driver.
    fn stream(&self, id: u32) -> (mpsc::UnboundedSender<Result<Bytes, StreamError>>, Stream) {
        let (inbound, chunks) = mpsc::unbounded_channel();
        let handle = Arc::new(StreamHandle {
            id,
            core: self.core.upgrade().expect("the core runs its driver"),
        });
        let stream = Stream {
            reader: StreamReader::new(chunks, Some(handle.clone())),
            writer: StreamWriter::new(handle),
        };
        (inbound, stream)
    }

    fn event(&mut self, event: Event) -> Result<(), String> {
        match event {
            Event::Opened((id, service)) => {
                let (inbound, stream) = self.stream(id);
                self.slots.insert(
                    id,
                    Slot {
                        inbound: Some(inbound),
                        ..Slot::default()
                    },
                );
                let step = match (self.acceptor)(&service, stream) {
                    Ok(()) => self.plugin.accept(id),
                    Err(refusal) => {
                        self.slots.remove(&id);
                        self.plugin.refuse(id, &to_plugin(refusal))
                    }
                };
                let step = step.map_err(trapped)?;
                self.answered(id, step)
            }
            Event::Replied((id, outcome)) => {
                let Some(slot) = self.slots.get_mut(&id) else {
                    return Ok(());
                };
                let Some((answer, stream)) = slot.opener.take() else {
                    return Ok(());
                };
                match outcome {
                    Ok(()) => {
                        let _ = answer.send(Ok(stream));
                        // What waited for the reply, if the plugin made it wait.
                        self.pump(id)?;
                    }
                    Err(refusal) => {
                        self.slots.remove(&id);
                        let _ = answer.send(Err(from_plugin(refusal)));
                    }
                }
                Ok(())
            }
            Event::Data(_) => Ok(()),
            Event::Writable(id) => self.pump(id),
            Event::Finished(id) => {
                if let Some(slot) = self.slots.get_mut(&id) {
                    slot.inbound = None;
                }
                self.forget_if_done(id);
                Ok(())
            }
            Event::Reset((id, reason)) => {
                if let Some(slot) = self.slots.remove(&id) {
                    fail(slot, &reason);
                }
                Ok(())
            }
            Event::Lost(reason) => Err(reason),
        }
    }

    /// Sends what credit allows of the stream's pending writes, then the
    /// finish it waits for.
    fn pump(&mut self, id: u32) -> Result<(), String> {
        loop {
            let Some(slot) = self.slots.get_mut(&id) else {
                return Ok(());
            };
            let Some((data, _)) = slot.pending.front() else {
                break;
            };
            let want = u32::try_from(data.len()).unwrap_or(u32::MAX);
            let (header, granted) = match self.plugin.send(id, want).map_err(trapped)? {
                Ok(reserved) => reserved,
                // A plugin without early data: wait for the reply.
                Err(_) if slot.opener.is_some() => return Ok(()),
                Err(e) => {
                    if let Some(slot) = self.slots.remove(&id) {
                        fail(slot, &e);
                    }
                    return Ok(());
                }
            };
            if granted == 0 {
                return Ok(());
            }
            let slot = self.slots.get_mut(&id).expect("checked above");
            let (data, _) = slot.pending.front_mut().expect("checked above");
            let granted = granted as usize;
            let message = Outbound {
                head: Bytes::from(header),
                body: data.split_to(granted),
            };
            if data.is_empty() {
                let (_, done) = slot.pending.pop_front().expect("checked above");
                let _ = done.send(Ok(()));
            }
            self.output
                .send(message)
                .map_err(|_| "the websocket writer has ended".to_string())?;
        }
        let slot = self.slots.get_mut(&id).expect("the loop returns when gone");
        if slot.finish_after && !slot.finished {
            let step = self.plugin.finish(id).map_err(trapped)?;
            if step.is_err() && slot.opener.is_some() {
                // A plugin without early data: finish after the reply.
                return Ok(());
            }
            slot.finished = true;
            self.answered(id, step)?;
            self.forget_if_done(id);
        }
        Ok(())
    }

    /// A stream's call answered: its step. An `Err` there means the stream
    /// is gone, not the session.
    fn answered(&mut self, id: u32, step: Result<Step, String>) -> Result<(), String> {
        match step {
            Ok(step) => self.apply(step),
            Err(e) => {
                if let Some(slot) = self.slots.remove(&id) {
                    fail(slot, &e);
                }
                Ok(())
            }
        }
    }

    pub(crate) fn apply(&mut self, step: Step) -> Result<(), String> {
        self.write_frames(step.frames)?;
        for event in step.events {
            self.event(event)?;
        }
        Ok(())
    }

    fn write_frames(&self, frames: Vec<Vec<u8>>) -> Result<(), String> {
        for frame in frames {
            self.output
                .send(Outbound {
                    head: Bytes::from(frame),
                    body: Bytes::new(),
                })
                .map_err(|_| "the websocket writer has ended".to_string())?;
        }
        Ok(())
    }

    fn forget_if_done(&mut self, id: u32) {
        if let Some(slot) = self.slots.get(&id)
            && slot.inbound.is_none()
            && slot.finished
        {
            self.slots.remove(&id);
        }
    }
}

/// Fails what waits on a stream that is gone.
fn fail(slot: Slot, reason: &str) {
    if let Some(inbound) = &slot.inbound {
        let _ = inbound.send(Err(StreamError::Reset(reason.to_string())));
    }
    for (_, done) in slot.pending {
        let _ = done.send(Err(StreamError::Reset(reason.to_string())));
    }
    if let Some((answer, _)) = slot.opener {
        let _ = answer.send(Err(Refusal::NotDelivered(reason.to_string())));
    }
}

fn trapped(e: switchyard_runtime::CallError) -> String {
    format!("tunnel plugin failed: {e}")
}

fn to_plugin(refusal: Refusal) -> plugin::Refusal {
    match refusal {
        Refusal::UnknownService => plugin::Refusal::UnknownService,
        Refusal::ServiceRefused(message) => plugin::Refusal::ServiceRefused(message),
        Refusal::Overloaded => plugin::Refusal::Overloaded,
        // Cannot be sent: the closest honest answer is that the service refused.
        Refusal::NotDelivered(message) | Refusal::NoRoute(message) => {
            plugin::Refusal::ServiceRefused(message)
        }
    }
}

fn from_plugin(refusal: plugin::Refusal) -> Refusal {
    match refusal {
        plugin::Refusal::UnknownService => Refusal::UnknownService,
        plugin::Refusal::ServiceRefused(message) => Refusal::ServiceRefused(message),
        plugin::Refusal::Overloaded => Refusal::Overloaded,
        plugin::Refusal::NotDelivered(why) => Refusal::NotDelivered(why),
    }
}

/// The plugin's name for a lane.
pub(super) fn to_plugin_lane(lane: Lane) -> plugin::Lane {
    match lane {
        Lane::Inference => plugin::Lane::Inference,
        Lane::Bulk => plugin::Lane::Bulk,
    }
}

/// A stream's way back to its driver.
struct StreamHandle {
    id: u32,
    core: Arc<Core>,
}

impl WriteSink for StreamHandle {
    fn write(&self, data: Bytes, done: oneshot::Sender<Result<(), StreamError>>) {
        self.core.submit(Command::Write {
            stream: self.id,
            data,
            done,
        });
    }

    fn finish(&self) {
        self.core.submit(Command::Finish(self.id));
    }

    fn reset(&self) {
        self.core.submit(Command::Reset(self.id));
    }
}

impl ConsumeSink for StreamHandle {
    fn consumed(&self, n: usize) {
        self.core.submit(Command::Consumed { stream: self.id, n });
    }

    fn abandoned(&self) {
        self.core.submit(Command::Reset(self.id));
    }
}
