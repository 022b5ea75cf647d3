//! The W3C trace context of a request: `traceparent:
//! 00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>`.

/// The header's name.
pub const TRACEPARENT: &str = "traceparent";

/// Where a span sits: its trace, its own id, and whether the trace is
/// sampled (the caller's choice, kept as it came).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace's id (never all zero).
    pub trace_id: [u8; 16],
    /// This span's id (never all zero).
    pub span_id: [u8; 8],
    /// The `sampled` flag.
    pub sampled: bool,
}

impl TraceContext {
    /// A new trace, sampled.
    pub fn root() -> Self {
        Self {
            trace_id: nonzero(),
            span_id: nonzero(),
            sampled: true,
        }
    }

    /// A new span in the same trace.
    pub fn child(&self) -> Self {
        Self {
            trace_id: self.trace_id,
            span_id: nonzero(),
            sampled: self.sampled,
        }
    }

    /// Parses a `traceparent` value; `None` for anything the W3C
    /// specification says to ignore (then a new trace starts).
    pub fn parse(value: &str) -> Option<Self> {
        let mut parts = value.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        // Version 00 has exactly four fields; a later version may add some.
        if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
            return None;
        }
        let lower_hex = |s: &str| s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !lower_hex(version) || !lower_hex(trace) || !lower_hex(span) || !lower_hex(flags) {
            return None;
        }
        let trace_id: [u8; 16] = hex::decode(trace).ok()?.try_into().ok()?;
        let span_id: [u8; 8] = hex::decode(span).ok()?.try_into().ok()?;
        let flags = hex::decode(flags).ok().filter(|f| f.len() == 1)?[0];
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The `traceparent` value naming this span as the parent.
    pub fn header(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            hex::encode(self.trace_id),
            hex::encode(self.span_id),
            u8::from(self.sampled)
        )
    }

    /// The trace id in hex, as logs and tests show it.
    pub fn trace_hex(&self) -> String {
        hex::encode(self.trace_id)
    }
}

fn nonzero<const N: usize>() -> [u8; N] {
    loop {
        let id: [u8; N] = rand::random();
        if id != [0; N] {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_reads_back_as_it_was_written() {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = TraceContext::parse(value).unwrap();
        assert_eq!(context.header(), value);
        assert!(context.sampled);
        let child = context.child();
        assert_eq!(child.trace_id, context.trace_id);
        assert_ne!(child.span_id, context.span_id);
    }

    #[test]
    fn what_the_specification_ignores_is_not_a_parent() {
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad}");
        }
        // A later version may carry more fields.
        assert!(
            TraceContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x")
                .is_some()
        );
    }
}
