//! RFC 6455 frame heads and masking: the parts of the websocket wire format
//! that [`super::wire`] reads and writes.

/// The largest message (and frame) either end takes.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// The most bytes a frame head takes: 2, an 8-byte length, a 4-byte mask.
pub const MAX_HEAD: usize = 14;

/// Which end of the websocket this is: a client masks every frame it
/// writes and reads unmasked ones; a server the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// A frame's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl Opcode {
    fn parse(bits: u8) -> Option<Self> {
        Some(match bits {
            0x0 => Self::Continuation,
            0x1 => Self::Text,
            0x2 => Self::Binary,
            0x8 => Self::Close,
            0x9 => Self::Ping,
            0xA => Self::Pong,
            _ => return None,
        })
    }

    fn bits(self) -> u8 {
        match self {
            Self::Continuation => 0x0,
            Self::Text => 0x1,
            Self::Binary => 0x2,
            Self::Close => 0x8,
            Self::Ping => 0x9,
            Self::Pong => 0xA,
        }
    }

    /// Close, ping and pong: short, never fragmented, allowed between the
    /// fragments of a message.
    pub fn is_control(self) -> bool {
        matches!(self, Self::Close | Self::Ping | Self::Pong)
    }
}

/// A parsed frame head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub fin: bool,
    pub opcode: Opcode,
    pub mask: Option<[u8; 4]>,
    /// The payload's length.
    pub length: usize,
    /// The head's own length on the wire.
    pub size: usize,
}

/// Why a frame was refused; the connection ends with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a frame set a reserved bit (no extension was negotiated)")]
    Reserved,
    #[error("unknown opcode {0:#x}")]
    UnknownOpcode(u8),
    #[error("a control frame was fragmented or longer than 125 bytes")]
    BadControl,
    #[error("a client sent an unmasked frame")]
    Unmasked,
    #[error("a server sent a masked frame")]
    Masked,
    #[error("a frame of {0} bytes is over the limit")]
    TooLong(u64),
    #[error("a fragment arrived outside a fragmented message, or a message began inside one")]
    Fragments,
}

/// Parses the head at the start of `bytes` as read by `role`; `None` while
/// it is incomplete. A payload over `max` is refused before it is read.
pub fn parse_head(bytes: &[u8], role: Role, max: usize) -> Result<Option<Head>, FrameError> {
    let [first, second, ..] = *bytes else {
        return Ok(None);
    };
    if first & 0x70 != 0 {
        return Err(FrameError::Reserved);
    }
    let opcode = Opcode::parse(first & 0x0F).ok_or(FrameError::UnknownOpcode(first & 0x0F))?;
    let fin = first & 0x80 != 0;
    let masked = second & 0x80 != 0;
    match (role, masked) {
        (Role::Server, false) => return Err(FrameError::Unmasked),
        (Role::Client, true) => return Err(FrameError::Masked),
        _ => {}
    }
    let (length, mut size) = match second & 0x7F {
        126 => match bytes.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Ok(None),
        },
        127 => match bytes.get(2..10) {
            Some(b) => (u64::from_be_bytes(b.try_into().expect("8 bytes")), 10),
            None => return Ok(None),
        },
        short => (u64::from(short), 2),
    };
    if opcode.is_control() && (!fin || length > 125) {
        return Err(FrameError::BadControl);
    }
    if length > max as u64 {
        return Err(FrameError::TooLong(length));
    }
    let mask = if masked {
        let Some(key) = bytes.get(size..size + 4) else {
            return Ok(None);
        };
        size += 4;
        Some(key.try_into().expect("4 bytes"))
    } else {
        None
    };
    Ok(Some(Head {
        fin,
        opcode,
        mask,
        length: length as usize,
        size,
    }))
}

/// Writes a final frame's head into `out`; answers its length.
pub fn write_head(
    out: &mut [u8; MAX_HEAD],
    opcode: Opcode,
    length: usize,
    mask: Option<[u8; 4]>,
) -> usize {
    out[0] = 0x80 | opcode.bits();
    let masked = if mask.is_some() { 0x80 } else { 0 };
    let mut size = match length {
        0..=125 => {
            out[1] = masked | length as u8;
            2
        }
        126..=0xFFFF => {
            out[1] = masked | 126;
            out[2..4].copy_from_slice(&(length as u16).to_be_bytes());
            4
        }
        _ => {
            out[1] = masked | 127;
            out[2..10].copy_from_slice(&(length as u64).to_be_bytes());
            10
        }
    };
    if let Some(key) = mask {
        out[size..size + 4].copy_from_slice(&key);
        size += 4;
    }
    size
}

/// XORs `data` with `key`, `data[0]` taking `key[phase % 4]`: masking and
/// unmasking are the same. Eight bytes at a time.
pub fn apply_mask(data: &mut [u8], key: [u8; 4], phase: usize) {
    let key = std::array::from_fn::<u8, 4, _>(|i| key[(i + phase) % 4]);
    let wide = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let word = u64::from_ne_bytes((&*chunk).try_into().expect("8 bytes")) ^ wide;
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    for (i, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= key[i % 4];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(bytes: &[u8], role: Role) -> Result<Option<Head>, FrameError> {
        parse_head(bytes, role, 64 * 1024)
    }

    #[test]
    fn heads_round_trip_at_each_length_encoding() {
        for (length, size) in [(0, 2), (125, 2), (126, 4), (65_535, 4), (65_536, 10)] {
            for mask in [None, Some([1, 2, 3, 4])] {
                let mut out = [0u8; MAX_HEAD];
                let written = write_head(&mut out, Opcode::Binary, length, mask);
                let extra = if mask.is_some() { 4 } else { 0 };
                assert_eq!(written, size + extra);
                let role = if mask.is_some() {
                    Role::Server
                } else {
                    Role::Client
                };
                let parsed = parse_head(&out[..written], role, usize::MAX)
                    .unwrap()
                    .unwrap();
                assert_eq!(
                    parsed,
                    Head {
                        fin: true,
                        opcode: Opcode::Binary,
                        mask,
                        length,
                        size: written
                    }
                );
                // Any shorter prefix is incomplete, not an error.
                for cut in 0..written {
                    assert_eq!(parse_head(&out[..cut], role, usize::MAX), Ok(None));
                }
            }
        }
    }

    #[test]
    fn each_role_refuses_the_other_masking() {
        assert_eq!(head(&[0x82, 0x00], Role::Server), Err(FrameError::Unmasked));
        assert_eq!(
            head(&[0x82, 0x80, 0, 0, 0, 0], Role::Client),
            Err(FrameError::Masked)
        );
    }

    #[test]
    fn reserved_bits_unknown_opcodes_bad_controls_and_long_frames_are_refused() {
        assert_eq!(head(&[0xC2, 0x00], Role::Client), Err(FrameError::Reserved));
        assert_eq!(
            head(&[0x83, 0x00], Role::Client),
            Err(FrameError::UnknownOpcode(3))
        );
        // A ping without FIN, and one of 126 bytes.
        assert_eq!(
            head(&[0x09, 0x00], Role::Client),
            Err(FrameError::BadControl)
        );
        assert_eq!(
            head(&[0x89, 126, 0, 126], Role::Client),
            Err(FrameError::BadControl)
        );
        let mut huge = vec![0x82, 127];
        huge.extend_from_slice(&u64::MAX.to_be_bytes());
        assert_eq!(
            head(&huge, Role::Client),
            Err(FrameError::TooLong(u64::MAX))
        );
    }

    #[test]
    fn masking_matches_the_byte_by_byte_definition_at_every_phase() {
        let key = [0x12, 0x34, 0x56, 0x78];
        let data: Vec<u8> = (0..37u8).collect();
        for phase in 0..4 {
            let mut fast = data.clone();
            apply_mask(&mut fast, key, phase);
            let slow: Vec<u8> = data
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ key[(i + phase) % 4])
                .collect();
            assert_eq!(fast, slow, "phase {phase}");
            apply_mask(&mut fast, key, phase);
            assert_eq!(fast, data);
        }
    }
}
