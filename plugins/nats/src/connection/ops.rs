//! The operations: publish, subscribe, unsubscribe, request. Each checks
//! everything first and either returns one write or an error with nothing
//! written.

use super::Connection;
use crate::action::{Action, Output, Payload};
use crate::encode;
use crate::error::Error;
use crate::headers;
use crate::request::{INBOX_SID, RequestId};

impl Connection {
    /// Publishes `payload` to `subject` (PUB, or HPUB with a NATS/1.0 header
    /// block when `headers` is given). At most once: refused with
    /// [`Error::NotConnected`] while there is no connection, and with
    /// [`Error::PayloadTooLarge`] above [`Connection::max_payload`].
    pub fn publish(
        &mut self,
        subject: &str,
        reply_to: Option<&str>,
        headers: Option<&[(String, String)]>,
        payload: &[u8],
    ) -> Result<Output, Error> {
        self.publish_payload(subject, reply_to, headers, Payload::Bytes(payload))
    }

    /// [`Connection::publish`] of a payload that may be held by the host:
    /// its framing is written around an [`Action::WritePayload`].
    pub fn publish_payload(
        &mut self,
        subject: &str,
        reply_to: Option<&str>,
        headers: Option<&[(String, String)]>,
        payload: Payload<'_>,
    ) -> Result<Output, Error> {
        self.ensure_connected()?;
        let policy = &self.config.subject_policy;
        policy.check(subject, false)?;
        if let Some(reply) = reply_to {
            policy.check(reply, false)?;
        }
        let inline = match payload {
            Payload::Bytes(bytes) => bytes.len(),
            Payload::Held { .. } => 0,
        };
        let write = Vec::with_capacity(inline + subject.len() + 48);
        self.write_publish(write, subject, reply_to, headers, payload)
    }

    /// Subscribes `sid` (from 1; 0 is the inbox's) to `subject`, which may
    /// use `*`, optionally in a queue group. Allowed while disconnected: the
    /// SUB goes out with the next handshake, as on every reconnect.
    pub fn subscribe(
        &mut self,
        sid: u64,
        subject: &str,
        queue_group: Option<&str>,
    ) -> Result<Output, Error> {
        if matches!(self.phase, super::Phase::Closed) {
            return Err(Error::Closed);
        }
        if sid == INBOX_SID {
            return Err(Error::ReservedSid);
        }
        if self.subs.contains(sid) {
            return Err(Error::DuplicateSid(sid));
        }
        self.config.subject_policy.check(subject, true)?;
        if let Some(queue) = queue_group {
            let bad =
                queue.is_empty() || queue.chars().any(|c| c.is_whitespace() || c.is_control());
            if bad {
                return Err(Error::InvalidQueueGroup(queue.to_owned()));
            }
        }
        // Encoded even when it is not sent now, so that a line too long for
        // the server is refused here and not at a reconnect.
        let mut write = Vec::new();
        encode::subscribe(&mut write, subject, queue_group, sid)?;
        self.subs.insert(sid, subject, queue_group);
        Ok(self.if_connect_sent(write))
    }

    /// Ends `sid` now, or after `max_msgs` messages counted from the SUB
    /// (the NATS meaning). Messages already on their way for an ended sid
    /// are dropped and counted in [`Connection::dropped_messages`].
    pub fn unsubscribe(&mut self, sid: u64, max_msgs: Option<u64>) -> Result<Output, Error> {
        if matches!(self.phase, super::Phase::Closed) {
            return Err(Error::Closed);
        }
        if !self.subs.unsubscribe(sid, max_msgs) {
            return Err(Error::UnknownSid(sid));
        }
        let mut write = Vec::new();
        encode::unsubscribe(&mut write, sid, max_msgs);
        Ok(self.if_connect_sent(write))
    }

    /// Sends a request whose reply comes back as [`Action::Reply`] with the
    /// returned id: the reply, [`crate::RequestError::NoResponders`], or
    /// [`crate::RequestError::TimedOut`] from the first `on_tick` at or after
    /// `now_ms + timeout_ms`. The first request also subscribes the inbox.
    pub fn request(
        &mut self,
        subject: &str,
        payload: &[u8],
        timeout_ms: u64,
        now_ms: u64,
    ) -> Result<(RequestId, Output), Error> {
        self.request_with_headers(subject, None, payload, timeout_ms, now_ms)
    }

    /// [`Connection::request`] with headers (HPUB).
    pub fn request_with_headers(
        &mut self,
        subject: &str,
        headers: Option<&[(String, String)]>,
        payload: &[u8],
        timeout_ms: u64,
        now_ms: u64,
    ) -> Result<(RequestId, Output), Error> {
        self.request_payload(
            subject,
            headers,
            Payload::Bytes(payload),
            timeout_ms,
            now_ms,
        )
    }

    /// [`Connection::request_with_headers`] of a payload that may be held by
    /// the host.
    pub fn request_payload(
        &mut self,
        subject: &str,
        headers: Option<&[(String, String)]>,
        payload: Payload<'_>,
        timeout_ms: u64,
        now_ms: u64,
    ) -> Result<(RequestId, Output), Error> {
        self.ensure_connected()?;
        self.config.subject_policy.check(subject, false)?;
        let (_, reply_to) = self.requests.peek();
        let inline = match payload {
            Payload::Bytes(bytes) => bytes.len(),
            Payload::Held { .. } => 0,
        };
        let mut write = Vec::with_capacity(inline + subject.len() + reply_to.len() + 64);
        if !self.requests.is_active() {
            // The engine's own inbox: not a caller's subject, so the policy
            // does not apply to it.
            encode::subscribe(&mut write, &self.requests.pattern(), None, INBOX_SID)?;
        }
        let output = self.write_publish(write, subject, Some(&reply_to), headers, payload)?;
        self.requests.activate();
        let id = self.requests.start(now_ms.saturating_add(timeout_ms));
        Ok((id, output))
    }

    /// The publish after what `out` holds already: one write, or for a held
    /// payload the framing around the host's bytes.
    fn write_publish(
        &self,
        mut out: Vec<u8>,
        subject: &str,
        reply_to: Option<&str>,
        headers: Option<&[(String, String)]>,
        payload: Payload<'_>,
    ) -> Result<Output, Error> {
        let header = self.header_block(headers, payload.len())?;
        match payload {
            Payload::Bytes(bytes) => {
                encode::publish(&mut out, subject, reply_to, header, bytes)?;
                Ok(vec![Action::Write(out)])
            }
            Payload::Held { id, len } => {
                encode::publish_head(&mut out, subject, reply_to, header, len)?;
                Ok(vec![
                    Action::Write(out),
                    Action::WritePayload(id),
                    Action::Write(b"\r\n".to_vec()),
                ])
            }
        }
    }

    /// [`Connection::publish`] appended to `out`, the write of a burst of
    /// publishes: one buffer for all of them, not one per message. A
    /// refused publish leaves `out` as it was.
    pub fn publish_to(
        &mut self,
        out: &mut Vec<u8>,
        subject: &str,
        reply_to: Option<&str>,
        headers: Option<&[(String, String)]>,
        payload: &[u8],
    ) -> Result<(), Error> {
        self.ensure_connected()?;
        let policy = &self.config.subject_policy;
        policy.check(subject, false)?;
        if let Some(reply) = reply_to {
            policy.check(reply, false)?;
        }
        let header = self.header_block(headers, payload.len())?;
        encode::publish(out, subject, reply_to, header, payload)
    }

    /// The header block's entries and encoded length, once the server is
    /// known to take headers and the message to fit its max_payload.
    #[allow(clippy::type_complexity)]
    fn header_block<'h>(
        &self,
        headers: Option<&'h [(String, String)]>,
        payload_len: usize,
    ) -> Result<Option<(&'h [(String, String)], usize)>, Error> {
        let header = match headers {
            Some(entries) => {
                if !self.info.as_ref().is_some_and(|i| i.headers) {
                    return Err(Error::HeadersNotSupported);
                }
                Some((entries, headers::encoded_len(entries)?))
            }
            None => None,
        };
        let size = header.map_or(0, |(_, len)| len) + payload_len;
        let max = self.max_payload();
        if size > max {
            return Err(Error::PayloadTooLarge { size, max });
        }
        Ok(header)
    }

    fn if_connect_sent(&self, write: Vec<u8>) -> Output {
        if self.connect_sent() {
            vec![Action::Write(write)]
        } else {
            Vec::new()
        }
    }
}
