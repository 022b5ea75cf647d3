//! The NUL-terminated strings NVML writes into the caller's buffers.

use std::ffi::CStr;

/// The buffer size for names and UUIDs: `NVML_DEVICE_NAME_V2_BUFFER_SIZE` and
/// `NVML_DEVICE_UUID_V2_BUFFER_SIZE` are both 96 in `nvml.h`.
pub(super) const STRING_BUFFER_SIZE: usize = 96;

/// A buffer that does not hold a usable string.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BufferError {
    /// No NUL anywhere in the buffer.
    #[error("no NUL terminator in its {0} bytes")]
    Unterminated(usize),
    /// The bytes before the NUL are not UTF-8.
    #[error("not UTF-8 ({0})")]
    NotUtf8(std::str::Utf8Error),
}

/// The string before the first NUL.
pub(super) fn decode(buffer: &[u8]) -> Result<String, BufferError> {
    let text =
        CStr::from_bytes_until_nul(buffer).map_err(|_| BufferError::Unterminated(buffer.len()))?;
    text.to_str()
        .map(str::to_owned)
        .map_err(BufferError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(text: &[u8]) -> [u8; STRING_BUFFER_SIZE] {
        let mut buffer = [0; STRING_BUFFER_SIZE];
        buffer[..text.len()].copy_from_slice(text);
        buffer
    }

    #[test]
    fn stops_at_the_first_nul() {
        assert_eq!(decode(&buffer(b"NVIDIA H200")).unwrap(), "NVIDIA H200");
        assert_eq!(decode(b"GPU-1\0stale bytes\0").unwrap(), "GPU-1");
        assert_eq!(decode(&buffer(b"")).unwrap(), "");
    }

    #[test]
    fn a_full_buffer_without_nul_is_an_error() {
        let full = [b'x'; STRING_BUFFER_SIZE];
        assert_eq!(decode(&full), Err(BufferError::Unterminated(96)));
        assert_eq!(
            decode(&full).unwrap_err().to_string(),
            "no NUL terminator in its 96 bytes"
        );
        assert_eq!(decode(&[]), Err(BufferError::Unterminated(0)));
    }

    #[test]
    fn bytes_that_are_not_utf8_are_an_error() {
        assert!(matches!(
            decode(&buffer(b"H\xff200")),
            Err(BufferError::NotUtf8(_))
        ));
    }
}
