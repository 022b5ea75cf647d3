//! The reading side: frames out of each read, the handshake, deliveries and
//! replies.

use std::ops::Range;

use super::{Connection, Phase, READ_ROOM};
use crate::action::{Action, Batch, Claim, ClaimTarget, Intake, Message, Output};
use crate::connect::{ClientOptions, write_connect};
use crate::encode;
use crate::error::Error;
use crate::headers::{Headers, parse_headers};
use crate::info::ServerInfo;
use crate::parser::{MAX_SERVER_LINE, MsgFrame, MsgHead, ServerOp, parse_frame_claiming, split_op};
use crate::request::{INBOX_SID, RequestError};
use crate::server_error::ServerError;

impl Connection {
    /// Bytes arrived: one whole read, with any number of frames and possibly
    /// an unfinished one at the end, which the engine keeps for the next read.
    /// For an engine that claims no payloads (`Config::claim_bodies_from`
    /// unset); one that does reads with [`Connection::on_read`].
    pub fn on_bytes(&mut self, data: &[u8], now_ms: u64) -> Output {
        let intake = self.on_read(data, now_ms);
        debug_assert!(intake.claim.is_none(), "on_bytes on a claiming engine");
        intake.output
    }

    /// Bytes arrived, as [`Connection::on_bytes`]; with
    /// `Config::claim_bodies_from` set, reading stops at the first payload at
    /// least that large: the answer's [`Claim`] says where it goes, and the
    /// host hands the bytes after it (from its CRLF) to the next call.
    pub fn on_read(&mut self, data: &[u8], now_ms: u64) -> Intake {
        let mut batch = Batch::default();
        let all = data.len();
        if !self.has_transport() {
            // Bytes from a transport that is closing or gone mean nothing.
            return intake(batch, all, None);
        }
        let mut skip = match self.skip_claim_crlf(data) {
            Ok(skip) => skip,
            Err(error) => return self.fail_read(error, batch, all),
        };
        let data = &data[skip..];
        // A protocol line arriving in pieces: its newline can only be in the
        // new bytes, so only they are searched. Parsing what is held again on
        // every read would make a server that sends a 64 KiB line one byte
        // at a time cost quadratic time (about a second of CPU per line).
        // nats.go's parser likewise keeps its state between reads and looks
        // at each byte once.
        if self.awaiting_newline
            && !self.read_buf.is_empty()
            && self.read_buf.len() + data.len() <= MAX_SERVER_LINE
            && !data.contains(&b'\n')
        {
            self.read_buf.extend_from_slice(data);
            return intake(batch, all, None);
        }
        let mut held = std::mem::take(&mut self.read_buf);
        let finished = match self.read_finished_held(&mut held, data, skip, now_ms, &mut batch) {
            Ok(n) => n,
            Err(error) => return self.fail_read(error, batch, all),
        };
        let data = &data[finished..];
        skip += finished;
        let held_before = held.len();
        let from_held = !held.is_empty();
        if from_held {
            held.extend_from_slice(data);
        }
        // Common case: no unfinished frame, so parse the caller's buffer in
        // place and copy only its tail.
        let input: &[u8] = if from_held { &held } else { data };
        let origin = Origin {
            input: input.as_ptr() as usize,
            data_from: held_before,
            skipped: skip,
        };
        let (used, result, claim) = self.read_frames(input, origin, now_ms, &mut batch);
        if let Some(claim) = claim {
            // Everything held was the claimed message's line: the payload
            // starts in this read's bytes.
            self.awaiting_newline = false;
            self.after_claim = 2;
            let consumed = skip + used.saturating_sub(held_before);
            return intake(batch, consumed, Some(claim));
        }
        let rest = input.len() - used;
        match result {
            Err(error) => self.fail(error, &mut batch),
            Ok(()) if !self.has_transport() => {}
            Ok(()) if rest > self.read_limit() => {
                let error = Error::ReadBufferFull {
                    size: rest,
                    limit: self.read_limit(),
                };
                self.fail(error, &mut batch);
            }
            Ok(()) => {
                if from_held {
                    held.drain(..used);
                } else {
                    held.extend_from_slice(&data[used..]);
                }
                // Stops at the first newline, or reads only a partial line
                // that this read completed or began.
                self.awaiting_newline = !held.contains(&b'\n');
                self.read_buf = held;
            }
        }
        intake(batch, all, None)
    }

    /// Steps over the CRLF still owed after a claimed payload, which may be
    /// split across reads: how many bytes of `data` it took.
    #[inline]
    fn skip_claim_crlf(&mut self, data: &[u8]) -> Result<usize, Error> {
        let mut skip = 0;
        while self.after_claim > 0 && skip < data.len() {
            if data[skip] != b"\r\n"[2 - self.after_claim] {
                return Err(Error::Protocol(
                    "a claimed payload is not followed by CRLF".into(),
                ));
            }
            skip += 1;
            self.after_claim -= 1;
        }
        Ok(skip)
    }

    /// Reads the frame `held` begins when this read finishes it: how many
    /// bytes of `data` it took (0 when it does not finish it). The frame is
    /// read alone, with only the bytes it needs, so that the rest of the
    /// read is parsed in place (and answered as spans) rather than copied
    /// behind it.
    #[inline]
    fn read_finished_held(
        &mut self,
        held: &mut Vec<u8>,
        data: &[u8],
        skipped: usize,
        now_ms: u64,
        batch: &mut Batch,
    ) -> Result<usize, Error> {
        let data_from = held.len();
        let Some(n) = self.complete_held(held, data) else {
            return Ok(0);
        };
        let origin = Origin {
            input: held.as_ptr() as usize,
            data_from,
            skipped,
        };
        let (used, result, claim) = self.read_frames(held, origin, now_ms, batch);
        debug_assert!(claim.is_none(), "frame_len leaves claimed frames out");
        result?;
        // The frame is read; anything left (never, by `frame_len`) is
        // read again before the rest, as held bytes are.
        held.drain(..used);
        Ok(n)
    }

    /// A read that ends the connection: the error reported, nothing kept.
    fn fail_read(&mut self, error: Error, mut batch: Batch, consumed: usize) -> Intake {
        self.fail(error, &mut batch);
        intake(batch, consumed, None)
    }

    /// Finishes the frame `held` begins with the first bytes of `data`
    /// when `data` has all it needs and the frame is one this engine reads
    /// whole (not a claimed payload's head): how many bytes it took.
    /// Otherwise `held` is left as it was.
    fn complete_held(&self, held: &mut Vec<u8>, data: &[u8]) -> Option<usize> {
        if held.is_empty() {
            return None;
        }
        let before = held.len();
        // The frame's size is on its line, which may end in `data`.
        let line = match held.contains(&b'\n') {
            true => 0,
            false => data.iter().position(|&b| b == b'\n')? + 1,
        };
        held.extend_from_slice(&data[..line]);
        let need = self
            .frame_len(held)
            .and_then(|len| len.checked_sub(before))
            .filter(|&need| need >= line.max(1) && need <= data.len());
        match need {
            Some(need) => held.extend_from_slice(&data[line..need]),
            None => held.truncate(before),
        }
        need
    }

    /// The length of the frame at the start of `buf`, whose line is whole:
    /// `None` when a claim would end it or its size is not known yet (a
    /// header block still coming), or the line is faulty (reading it
    /// in full says why).
    fn frame_len(&self, buf: &[u8]) -> Option<usize> {
        let line = buf.iter().position(|&b| b == b'\n')?;
        let (op, _) = split_op(&buf[..line]);
        if !(op.eq_ignore_ascii_case(b"MSG") || op.eq_ignore_ascii_case(b"HMSG")) {
            // Any other operation is its line alone.
            return Some(line + 1);
        }
        match parse_frame_claiming(buf, self.max_payload_for_reading(), Some(1)) {
            Ok(Some((ServerOp::MsgHead(head), payload_start))) => {
                let claimed = self
                    .config
                    .claim_bodies_from
                    .is_some_and(|from| head.payload_len >= from.max(1));
                (!claimed).then_some(payload_start + head.payload_len + 2)
            }
            Ok(Some((_, len))) => Some(len),
            _ => None,
        }
    }

    /// The most an unfinished frame may hold.
    fn read_limit(&self) -> usize {
        self.max_payload_for_reading() + READ_ROOM
    }

    /// Incoming messages are bounded by the server's max_payload, not by the
    /// (possibly smaller) cap on what we send.
    fn max_payload_for_reading(&self) -> usize {
        let server = self
            .info
            .as_ref()
            .map_or(crate::info::DEFAULT_MAX_PAYLOAD, |i| i.max_payload);
        server.min(super::MAX_PAYLOAD_CEILING)
    }

    /// Handles every complete frame; returns the bytes used and the first
    /// fault, after which nothing more is read, or the claim that ends the read.
    fn read_frames(
        &mut self,
        input: &[u8],
        origin: Origin,
        now_ms: u64,
        batch: &mut Batch,
    ) -> (usize, Result<(), Error>, Option<Claim>) {
        let mut used = 0;
        let claim_from = self.config.claim_bodies_from;
        while self.has_transport() {
            match parse_frame_claiming(&input[used..], self.max_payload_for_reading(), claim_from) {
                Ok(None) => break,
                Ok(Some((ServerOp::MsgHead(head), len))) => {
                    used += len;
                    if matches!(self.phase, Phase::AwaitInfo { .. }) {
                        return (used, Err(Error::Protocol("MSG before INFO".into())), None);
                    }
                    let claim = self.on_msg_head(head, batch);
                    return (used, Ok(()), Some(claim));
                }
                Ok(Some((op, len))) => {
                    used += len;
                    if let Err(error) = self.handle(op, origin, now_ms, batch) {
                        return (used, Err(error), None);
                    }
                }
                Err(error) => return (used, Err(error), None),
            }
        }
        (used, Ok(()), None)
    }

    fn handle(
        &mut self,
        op: ServerOp<'_>,
        origin: Origin,
        now_ms: u64,
        batch: &mut Batch,
    ) -> Result<(), Error> {
        match op {
            ServerOp::Info(info) => self.on_info(*info, batch),
            ServerOp::Ping => {
                batch.write.extend_from_slice(encode::PONG);
                Ok(())
            }
            ServerOp::Pong => {
                self.on_pong(now_ms, batch);
                Ok(())
            }
            ServerOp::Ok => Ok(()),
            ServerOp::Err(text) => {
                let error = ServerError::new(text);
                if error.is_fatal() {
                    // The server closes after these; close first.
                    return Err(Error::Server(error));
                }
                // A refused subject or permission: the connection goes on.
                batch.push(Action::Error(Error::Server(error)));
                Ok(())
            }
            ServerOp::Msg(frame) => {
                if matches!(self.phase, Phase::AwaitInfo { .. }) {
                    return Err(Error::Protocol("MSG before INFO".into()));
                }
                self.on_msg(frame, origin, batch);
                Ok(())
            }
            // Only `read_frames` asks for heads, and handles them itself.
            ServerOp::MsgHead(_) => Err(Error::Protocol("unexpected message head".into())),
        }
    }

    fn on_info(&mut self, info: ServerInfo, batch: &mut Batch) -> Result<(), Error> {
        let Phase::AwaitInfo { deadline } = self.phase else {
            // An update (cluster URLs, lame duck mode) on a live connection.
            self.info = Some(info);
            return Ok(());
        };
        if info.tls_required && !self.config.tls {
            self.info = Some(info);
            return Err(Error::TlsRequired);
        }
        let options = ClientOptions {
            name: self.config.name.as_deref(),
            echo: self.config.echo,
            tls: self.config.tls,
        };
        // CONNECT, the subscriptions and PING in one write: the PONG then
        // confirms both the credentials and the subscriptions.
        let out = &mut batch.write;
        write_connect(out, &options, &self.credentials, &info)?;
        if self.requests.is_active() {
            encode::subscribe(out, &self.requests.pattern(), None, INBOX_SID)?;
        }
        let resubscribed = self.subs.write_all(out)?;
        out.extend_from_slice(encode::PING);
        self.info = Some(info);
        self.phase = Phase::AwaitPong {
            deadline,
            resubscribed,
        };
        Ok(())
    }

    fn on_pong(&mut self, now_ms: u64, batch: &mut Batch) {
        match std::mem::replace(&mut self.phase, Phase::Connected) {
            Phase::AwaitPong { resubscribed, .. } => {
                self.backoff.reset();
                self.pings_out = 0;
                self.next_ping_at = now_ms.saturating_add(self.config.ping_interval_ms);
                batch.push(if self.has_connected {
                    Action::Reconnected { resubscribed }
                } else {
                    Action::Connected
                });
                self.has_connected = true;
            }
            Phase::Connected => self.pings_out = 0,
            // A stray PONG before CONNECT means nothing.
            other => self.phase = other,
        }
    }

    fn on_msg(&mut self, frame: MsgFrame<'_>, origin: Origin, batch: &mut Batch) {
        let headers = match frame.header.map(parse_headers).transpose() {
            Ok(headers) => headers,
            Err(error) => {
                // A reply with bad headers leaves its request to time out.
                // One publisher's bad headers must not cost every subscriber
                // its connection: report and skip the message.
                if frame.sid != INBOX_SID {
                    self.subs.deliver(frame.sid);
                }
                self.dropped += 1;
                batch.push(Action::Error(Error::Header(error)));
                return;
            }
        };
        if frame.sid == INBOX_SID {
            self.on_reply(frame, headers, batch);
            return;
        }
        if !self.subs.deliver(frame.sid) {
            self.dropped += 1;
            return;
        }
        if self.config.deliver_spans
            && let Some((subject, reply_to, payload)) = origin.spans(&frame)
        {
            batch.push(Action::DeliverSpans {
                sid: frame.sid,
                subject,
                reply_to,
                headers,
                payload,
            });
            return;
        }
        batch.push(Action::Deliver {
            sid: frame.sid,
            subject: lossy(frame.subject),
            reply_to: frame.reply_to.map(lossy),
            headers,
            payload: frame.payload.to_vec(),
        });
    }

    /// A message whose payload the host takes: where it goes, decided as
    /// [`Connection::on_msg`] and `on_reply` decide for a whole message.
    fn on_msg_head(&mut self, head: MsgHead<'_>, batch: &mut Batch) -> Claim {
        let len = head.payload_len;
        let target = match head.header.map(parse_headers).transpose() {
            Err(error) => {
                if head.sid != INBOX_SID {
                    self.subs.deliver(head.sid);
                }
                self.dropped += 1;
                batch.push(Action::Error(Error::Header(error)));
                ClaimTarget::Drop
            }
            Ok(headers) if head.sid == INBOX_SID => match self.requests.resolve(head.subject) {
                // A claimed payload is never empty, so never "no responders".
                Some(request_id) => ClaimTarget::Reply {
                    request_id,
                    subject: lossy(head.subject),
                    headers,
                },
                None => {
                    self.dropped += 1;
                    ClaimTarget::Drop
                }
            },
            Ok(headers) => match self.subs.deliver(head.sid) {
                true => ClaimTarget::Deliver {
                    sid: head.sid,
                    subject: lossy(head.subject),
                    reply_to: head.reply_to.map(lossy),
                    headers,
                },
                false => {
                    self.dropped += 1;
                    ClaimTarget::Drop
                }
            },
        };
        Claim { len, target }
    }

    fn on_reply(&mut self, frame: MsgFrame<'_>, headers: Option<Headers>, batch: &mut Batch) {
        let Some(request_id) = self.requests.resolve(frame.subject) else {
            // Late (timed out) or not ours.
            self.dropped += 1;
            return;
        };
        let no_responders =
            headers.as_ref().is_some_and(Headers::is_no_responders) && frame.payload.is_empty();
        let result = if no_responders {
            Err(RequestError::NoResponders)
        } else {
            Ok(Message {
                subject: lossy(frame.subject),
                headers,
                payload: frame.payload.to_vec(),
            })
        };
        batch.push(Action::Reply { request_id, result });
    }
}

/// Where the bytes being parsed lie in the data `on_read` was handed: the
/// input is that data after `skipped` bytes (a claimed payload's CRLF),
/// behind `data_from` bytes held from earlier reads.
#[derive(Clone, Copy)]
struct Origin {
    /// The input's address.
    input: usize,
    data_from: usize,
    skipped: usize,
}

/// A message's subject, reply subject and payload as ranges of the data.
type Spans = (Range<usize>, Option<Range<usize>>, Range<usize>);

impl Origin {
    /// Where `part`, a slice of the input, lies in the data; `None` when it
    /// began in bytes held from an earlier read.
    fn span(&self, part: &[u8]) -> Option<Range<usize>> {
        let at = (part.as_ptr() as usize).checked_sub(self.input)?;
        let start = at.checked_sub(self.data_from)? + self.skipped;
        Some(start..start + part.len())
    }

    /// A whole message's spans, when all of it lies in the data.
    fn spans(&self, frame: &MsgFrame<'_>) -> Option<Spans> {
        let reply_to = match frame.reply_to {
            Some(reply) => Some(self.span(reply)?),
            None => None,
        };
        Some((
            self.span(frame.subject)?,
            reply_to,
            self.span(frame.payload)?,
        ))
    }
}

fn intake(batch: Batch, consumed: usize, claim: Option<Claim>) -> Intake {
    Intake {
        output: batch.finish(),
        consumed,
        claim,
    }
}

/// Subjects are ASCII in practice; a publisher's stray byte is replaced
/// rather than allowed to break the connection.
fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests;
