//! NVML, the NVIDIA driver's management library, loaded at run time.
//!
//! The library is opened with `dlopen`, not linked, so a worker built here
//! runs on machines without the driver; there [`Nvml::open`] answers
//! [`NvmlError::LibraryNotFound`].
//!
//! - `code.rs`: return codes as [`NvmlCode`].
//! - `buffer.rs`: the NUL-terminated strings NVML writes.
//! - `ffi.rs`: the calls themselves, the crate's only unsafe code.

mod buffer;
mod code;
#[allow(unsafe_code)]
mod ffi;

pub use buffer::BufferError;
pub use code::NvmlCode;

use crate::inventory::Gpu;

/// The library names tried, in order: the driver installs the versioned name;
/// the bare one comes only with development packages.
pub const LIBRARY_NAMES: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia-ml.so"];

/// What went wrong asking NVML.
#[derive(Debug, thiserror::Error)]
pub enum NvmlError {
    /// No library could be loaded: no NVIDIA driver on this machine.
    #[error("NVML is not available ({}); is the NVIDIA driver installed?", .attempts.join("; "))]
    LibraryNotFound {
        /// Why each library name failed to load.
        attempts: Vec<String>,
    },
    /// The library lacks a function: a driver older than NVML's v2 calls.
    #[error("the NVML library has no {symbol} (is the driver too old?): {reason}")]
    MissingSymbol {
        /// The function.
        symbol: &'static str,
        /// What the loader said.
        reason: String,
    },
    /// A call returned an error code.
    #[error("{call} failed with {code}: {message}")]
    Call {
        /// The NVML function.
        call: &'static str,
        /// The code it returned.
        code: NvmlCode,
        /// NVML's own description (`nvmlErrorString`), or ours.
        message: String,
    },
    /// A call returned a string that could not be read.
    #[error("{call} returned an unreadable string: {reason}")]
    BadString {
        /// The NVML function.
        call: &'static str,
        /// What was wrong with it.
        reason: BufferError,
    },
    /// Reading one GPU failed.
    #[error("GPU {index}: {reason}")]
    Gpu {
        /// The GPU's index.
        index: u32,
        /// What failed.
        reason: Box<NvmlError>,
    },
}

impl NvmlError {
    /// The NVML return code behind this error, if a call returned one.
    pub fn code(&self) -> Option<NvmlCode> {
        match self {
            NvmlError::Call { code, .. } => Some(*code),
            NvmlError::Gpu { reason, .. } => reason.code(),
            _ => None,
        }
    }
}

/// An initialised NVML; shut down when dropped.
pub struct Nvml {
    session: ffi::Session,
}

impl std::fmt::Debug for Nvml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvml").finish_non_exhaustive()
    }
}

impl Nvml {
    /// Loads the driver's library ([`LIBRARY_NAMES`]) and initialises NVML.
    pub fn open() -> Result<Self, NvmlError> {
        Self::open_from(&LIBRARY_NAMES)
    }

    /// Loads the first of `names` (file names or paths) that loads.
    pub fn open_from(names: &[&str]) -> Result<Self, NvmlError> {
        ffi::Session::open(names).map(|session| Nvml { session })
    }

    /// Every GPU NVML sees, with its memory in use now.
    pub fn gpus(&self) -> Result<Vec<Gpu>, NvmlError> {
        let count = self.session.device_count()?;
        (0..count)
            .map(|index| {
                self.gpu(index).map_err(|reason| NvmlError::Gpu {
                    index,
                    reason: Box::new(reason),
                })
            })
            .collect()
    }

    fn gpu(&self, index: u32) -> Result<Gpu, NvmlError> {
        let device = self.session.device(index)?;
        let memory = self.session.memory(device)?;
        Ok(Gpu {
            index,
            name: self.session.name(device)?,
            uuid: unsupported_as_none(self.session.uuid(device))?,
            memory_total_bytes: memory.total,
            memory_used_bytes: Some(memory.used),
        })
    }
}

/// A value the device may not have: `NVML_ERROR_NOT_SUPPORTED` is `None`.
fn unsupported_as_none<T>(result: Result<T, NvmlError>) -> Result<Option<T>, NvmlError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(error) if error.code() == Some(NvmlCode::NotSupported) => Ok(None),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call_error(code: NvmlCode) -> NvmlError {
        NvmlError::Call {
            call: "nvmlDeviceGetUUID",
            code,
            message: code.description().to_owned(),
        }
    }

    #[test]
    fn an_absent_library_is_a_clear_error() {
        let error = Nvml::open_from(&[
            "libswitchyard-absent-nvml.so.1",
            "/nonexistent/libnvidia-ml.so",
        ])
        .unwrap_err();
        let NvmlError::LibraryNotFound { attempts } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(attempts.len(), 2);
        let message = error.to_string();
        assert!(message.starts_with("NVML is not available ("), "{message}");
        assert!(
            message.contains("libswitchyard-absent-nvml.so.1"),
            "{message}"
        );
        assert!(
            message.contains("/nonexistent/libnvidia-ml.so"),
            "{message}"
        );
        assert!(
            message.ends_with("is the NVIDIA driver installed?"),
            "{message}"
        );
        assert_eq!(error.code(), None);
    }

    #[test]
    fn no_names_is_library_not_found() {
        assert!(matches!(
            Nvml::open_from(&[]),
            Err(NvmlError::LibraryNotFound { .. })
        ));
    }

    // libc is loaded in every process on glibc, so loading it again is
    // harmless, and it has no NVML functions.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_library_without_nvml_names_the_missing_function() {
        let error = Nvml::open_from(&["libc.so.6"]).unwrap_err();
        assert!(
            matches!(
                error,
                NvmlError::MissingSymbol {
                    symbol: "nvmlInit_v2",
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains("has no nvmlInit_v2"), "{error}");
    }

    #[test]
    fn call_errors_name_the_call_and_the_code() {
        let error = call_error(NvmlCode::DriverNotLoaded);
        assert_eq!(
            error.to_string(),
            "nvmlDeviceGetUUID failed with NVML_ERROR_DRIVER_NOT_LOADED: \
             the NVIDIA kernel driver is not loaded"
        );
        let error = NvmlError::Gpu {
            index: 3,
            reason: Box::new(call_error(NvmlCode::GpuIsLost)),
        };
        assert!(
            error
                .to_string()
                .starts_with("GPU 3: nvmlDeviceGetUUID failed")
        );
        assert_eq!(error.code(), Some(NvmlCode::GpuIsLost));
    }

    #[test]
    fn only_not_supported_becomes_none() {
        assert_eq!(unsupported_as_none(Ok(1)).unwrap(), Some(1));
        assert_eq!(
            unsupported_as_none::<u8>(Err(call_error(NvmlCode::NotSupported))).unwrap(),
            None
        );
        let error = unsupported_as_none::<u8>(Err(call_error(NvmlCode::GpuIsLost))).unwrap_err();
        assert_eq!(error.code(), Some(NvmlCode::GpuIsLost));
    }

    /// This machine's NVML: its GPUs where a driver is installed, else the
    /// error that says the library is missing (what machines without GPUs see).
    #[test]
    fn reads_the_gpus_of_this_machine_or_says_the_library_is_missing() {
        let nvml = match Nvml::open() {
            Ok(nvml) => nvml,
            Err(NvmlError::LibraryNotFound { .. }) => return,
            Err(other) => panic!("NVML is installed but failed: {other}"),
        };
        let gpus = nvml.gpus().expect("GPUs");
        assert!(!gpus.is_empty());
        for (position, gpu) in gpus.iter().enumerate() {
            assert_eq!(gpu.index as usize, position);
            assert!(!gpu.name.is_empty());
            assert!(
                gpu.uuid
                    .as_deref()
                    .is_some_and(|uuid| uuid.starts_with("GPU-"))
            );
            assert!(gpu.memory_total_bytes > 0);
            assert!(
                gpu.memory_used_bytes
                    .is_some_and(|used| used <= gpu.memory_total_bytes)
            );
            println!("{gpu:?}");
        }
        drop(nvml);
        // Initialisations are counted: a second session after the first
        // shut down works the same.
        assert_eq!(Nvml::open().unwrap().gpus().unwrap().len(), gpus.len());
    }
}
