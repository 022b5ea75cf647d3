//! [`PackedBatch`]: the publishes of one `publish-batch` call as a 0.4.0
//! carrier takes them, every subject and inline payload in one buffer and
//! each message as spans of it, so that a burst of small messages crosses
//! into the guest as two allocations, not two per message.

use super::{
    CarrierError, Header, Outgoing, PackedOutgoing, PackedPayload, Payload, PayloadRef, Refusal,
    Span,
};
use crate::CallError;

/// Publishes gathered for one call, in order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PackedBatch {
    data: Vec<u8>,
    messages: Vec<PackedOutgoing>,
}

/// A batch's buffer cannot pass 4 GiB (spans are 32-bit); the reactor
/// flushes long before (its burst is bounded, and inline payloads are
/// short), so this is a bug, not an input.
fn span(data: &mut Vec<u8>, bytes: &[u8]) -> Span {
    let offset = u32::try_from(data.len()).expect("a packed batch stays under 4 GiB");
    data.extend_from_slice(bytes);
    Span {
        offset,
        len: bytes.len() as u32,
    }
}

impl PackedBatch {
    /// Adds a message whose payload goes inline.
    pub fn push_inline(&mut self, subject: &str, headers: Vec<Header>, payload: &[u8]) {
        let subject = span(&mut self.data, subject.as_bytes());
        let payload = PackedPayload::Inline(span(&mut self.data, payload));
        self.messages.push(PackedOutgoing {
            subject,
            reply_to: None,
            headers,
            payload,
        });
    }

    /// Adds a message whose payload the host holds.
    pub fn push_held(&mut self, subject: &str, headers: Vec<Header>, payload: PayloadRef) {
        let subject = span(&mut self.data, subject.as_bytes());
        self.messages.push(PackedOutgoing {
            subject,
            reply_to: None,
            headers,
            payload: PackedPayload::Held(payload),
        });
    }

    /// How many messages it holds.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Empties it, keeping its memory for the next batch.
    pub fn clear(&mut self) {
        self.data.clear();
        self.messages.clear();
    }

    /// The buffer and the messages, as `publish-batch` takes them.
    pub(super) fn parts(&self) -> (&[u8], &[PackedOutgoing]) {
        (&self.data, &self.messages)
    }

    /// One [`Outgoing`] per message, for carriers older than 0.4.0.
    pub(super) fn unpack(&self) -> Vec<Outgoing> {
        let text = |s: Span| String::from_utf8_lossy(self.bytes(s)).into_owned();
        self.messages
            .iter()
            .map(|m| Outgoing {
                subject: text(m.subject),
                reply_to: m.reply_to.map(text),
                headers: m.headers.clone(),
                payload: match m.payload {
                    PackedPayload::Inline(s) => Payload::Inline(self.bytes(s).to_vec()),
                    PackedPayload::Held(held) => Payload::Held(held),
                },
            })
            .collect()
    }

    fn bytes(&self, s: Span) -> &[u8] {
        &self.data[s.offset as usize..][..s.len as usize]
    }
}

/// A `publish-batch` answer as a world gives it: one result per message
/// (0.3.0, 0.1.0), or only the refusals (0.4.0).
pub(super) enum Answers {
    Each(Vec<Result<(), CarrierError>>),
    Refused(Vec<Refusal>),
}

impl Answers {
    /// One result per message of a batch of `len`, in order.
    pub(super) fn per_message(
        self,
        len: usize,
    ) -> Result<Vec<Result<(), CarrierError>>, CallError> {
        let refused = match self {
            Answers::Each(each) => return Ok(each),
            Answers::Refused(refused) => refused,
        };
        let mut answers = vec![Ok(()); len];
        for refusal in refused {
            let Some(answer) = answers.get_mut(refusal.index as usize) else {
                return Err(CallError::InvalidAnswer(format!(
                    "refused message {} of a batch of {len}",
                    refusal.index
                )));
            };
            *answer = Err(refusal.error);
        }
        Ok(answers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_unpack_as_they_were_pushed() {
        let mut batch = PackedBatch::default();
        batch.push_inline("a.b", Vec::new(), b"hello");
        let header = Header {
            name: "K".into(),
            value: "v".into(),
        };
        batch.push_held("c", vec![header.clone()], PayloadRef { id: 9, len: 70_000 });
        batch.push_inline("d", Vec::new(), b"");
        assert_eq!(batch.len(), 3);
        let (data, messages) = batch.parts();
        assert_eq!(data, b"a.bhellocd");
        assert_eq!(messages[1].subject, Span { offset: 8, len: 1 });
        let unpacked = batch.unpack();
        assert_eq!(unpacked[0].subject, "a.b");
        assert_eq!(unpacked[0].payload, Payload::Inline(b"hello".to_vec()));
        assert_eq!(unpacked[1].headers, vec![header]);
        assert_eq!(
            unpacked[1].payload,
            Payload::Held(PayloadRef { id: 9, len: 70_000 })
        );
        assert_eq!(unpacked[2].payload, Payload::Inline(Vec::new()));
    }

    #[test]
    fn refusals_answer_their_messages_and_the_rest_are_taken() {
        let refused = |index| Refusal {
            index,
            error: CarrierError::NotConnected,
        };
        let answers = Answers::Refused(vec![refused(1)]).per_message(3).unwrap();
        assert_eq!(answers, [Ok(()), Err(CarrierError::NotConnected), Ok(())]);
        assert!(matches!(
            Answers::Refused(vec![refused(3)]).per_message(3),
            Err(CallError::InvalidAnswer(_))
        ));
    }
}
