//! The calls into NVML's shared library: the crate's only unsafe code.
//!
//! Types and signatures follow `nvml.h`; each `unsafe` block says why it is
//! sound. Everything else in [`super`] is safe code over [`Session`].

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::marker::PhantomData;

use libloading::Library;

use super::buffer::{self, STRING_BUFFER_SIZE};
use super::{NvmlCode, NvmlError};

/// `nvmlReturn_t`, a C enum.
type Return = c_int;

/// `nvmlDevice_t`, a pointer to an opaque struct.
type RawDevice = *mut c_void;

/// `nvmlMemory_t`: three `unsigned long long`, in bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Memory {
    pub(super) total: u64,
    // Part of the layout; the inventory reports `used`.
    pub(super) free: u64,
    pub(super) used: u64,
}

type StringFn = unsafe extern "C" fn(RawDevice, *mut c_char, c_uint) -> Return;

/// The functions this crate calls, copied out of the library.
struct Api {
    shutdown: unsafe extern "C" fn() -> Return,
    error_string: unsafe extern "C" fn(Return) -> *const c_char,
    device_count: unsafe extern "C" fn(*mut c_uint) -> Return,
    handle_by_index: unsafe extern "C" fn(c_uint, *mut RawDevice) -> Return,
    name: StringFn,
    uuid: StringFn,
    memory_info: unsafe extern "C" fn(RawDevice, *mut Memory) -> Return,
}

/// An initialised NVML, shut down on drop.
pub(super) struct Session {
    api: Api,
    // Declared after `api`, so it is unloaded only after `Drop::drop` has
    // called `nvmlShutdown` and nothing can call into it any more.
    _library: Library,
}

/// A device handle, valid while the session that gave it is.
#[derive(Clone, Copy)]
pub(super) struct Device<'s> {
    raw: RawDevice,
    _session: PhantomData<&'s Session>,
}

impl Session {
    /// Loads the first library of `names` that loads and initialises NVML.
    pub(super) fn open(names: &[&str]) -> Result<Self, NvmlError> {
        let library = load(names)?;
        // SAFETY (each `symbol` below): the type is the one `nvml.h` declares
        // for that name, and `Session` keeps the library loaded while `api`
        // holds the pointers.
        let init: unsafe extern "C" fn() -> Return = unsafe { symbol(&library, c"nvmlInit_v2")? };
        let api = unsafe {
            Api {
                shutdown: symbol(&library, c"nvmlShutdown")?,
                error_string: symbol(&library, c"nvmlErrorString")?,
                device_count: symbol(&library, c"nvmlDeviceGetCount_v2")?,
                handle_by_index: symbol(&library, c"nvmlDeviceGetHandleByIndex_v2")?,
                name: symbol(&library, c"nvmlDeviceGetName")?,
                uuid: symbol(&library, c"nvmlDeviceGetUUID")?,
                memory_info: symbol(&library, c"nvmlDeviceGetMemoryInfo")?,
            }
        };
        // SAFETY: nvmlInit_v2 takes nothing. NVML counts initialisations, and
        // a `Session` exists (so `Drop` shuts down) only once this succeeded.
        let raw = unsafe { init() };
        check(&api, "nvmlInit_v2", raw)?;
        Ok(Session {
            api,
            _library: library,
        })
    }

    pub(super) fn device_count(&self) -> Result<u32, NvmlError> {
        let mut count: c_uint = 0;
        // SAFETY: the pointer is to a live `c_uint`, which the call writes.
        let raw = unsafe { (self.api.device_count)(&mut count) };
        check(&self.api, "nvmlDeviceGetCount_v2", raw)?;
        Ok(count)
    }

    pub(super) fn device(&self, index: u32) -> Result<Device<'_>, NvmlError> {
        let mut device: RawDevice = std::ptr::null_mut();
        // SAFETY: the pointer is to a live handle, which the call writes; an
        // index out of range is an error code, not undefined behaviour.
        let raw = unsafe { (self.api.handle_by_index)(index, &mut device) };
        check(&self.api, "nvmlDeviceGetHandleByIndex_v2", raw)?;
        Ok(Device {
            raw: device,
            _session: PhantomData,
        })
    }

    pub(super) fn name(&self, device: Device<'_>) -> Result<String, NvmlError> {
        self.string("nvmlDeviceGetName", self.api.name, device)
    }

    pub(super) fn uuid(&self, device: Device<'_>) -> Result<String, NvmlError> {
        self.string("nvmlDeviceGetUUID", self.api.uuid, device)
    }

    pub(super) fn memory(&self, device: Device<'_>) -> Result<Memory, NvmlError> {
        let mut memory = Memory::default();
        // SAFETY: the handle comes from this live session; the pointer is to
        // a live `nvmlMemory_t`, which the call writes.
        let raw = unsafe { (self.api.memory_info)(device.raw, &mut memory) };
        check(&self.api, "nvmlDeviceGetMemoryInfo", raw)?;
        Ok(memory)
    }

    fn string(
        &self,
        call: &'static str,
        function: StringFn,
        device: Device<'_>,
    ) -> Result<String, NvmlError> {
        let mut text = [0u8; STRING_BUFFER_SIZE];
        // SAFETY: the handle comes from this live session; the buffer is
        // writable for the length passed, and NVML writes at most that much.
        let raw = unsafe {
            function(
                device.raw,
                text.as_mut_ptr().cast::<c_char>(),
                STRING_BUFFER_SIZE as c_uint,
            )
        };
        check(&self.api, call, raw)?;
        buffer::decode(&text).map_err(|reason| NvmlError::BadString { call, reason })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: this session's nvmlInit_v2 succeeded; this is its one
        // matching shutdown, after which the session is gone.
        let raw = unsafe { (self.api.shutdown)() };
        if let Err(error) = check(&self.api, "nvmlShutdown", raw) {
            tracing::debug!(%error, "NVML did not shut down cleanly");
        }
    }
}

/// The first of `names` that loads, or every reason none did.
fn load(names: &[&str]) -> Result<Library, NvmlError> {
    let mut attempts = Vec::with_capacity(names.len());
    for &name in names {
        // SAFETY: loading runs the library's initialisers; libnvidia-ml is
        // the driver's own library, made to be loaded into any process.
        match unsafe { Library::new(name) } {
            Ok(library) => return Ok(library),
            Err(error) => attempts.push(describe(name, &error)),
        }
    }
    Err(NvmlError::LibraryNotFound { attempts })
}

/// The loader's own words (libloading's `Display` is only "dlopen failed"),
/// naming the library once.
fn describe(name: &str, error: &libloading::Error) -> String {
    let reason =
        std::error::Error::source(error).map_or_else(|| error.to_string(), ToString::to_string);
    if reason.contains(name) {
        reason
    } else {
        format!("{name}: {reason}")
    }
}

/// The function `name` in `library`, as a plain pointer.
///
/// # Safety
/// `T` must be the function type `nvml.h` declares for `name`, and the
/// pointer must not be called after `library` is unloaded.
unsafe fn symbol<T: Copy>(library: &Library, name: &'static CStr) -> Result<T, NvmlError> {
    // SAFETY: the caller vouches for `T`.
    let found = unsafe { library.get::<T>(name) };
    found
        .map(|symbol| *symbol)
        .map_err(|error| NvmlError::MissingSymbol {
            symbol: name.to_str().unwrap_or("?"),
            reason: describe(name.to_str().unwrap_or("?"), &error),
        })
}

/// `Ok` for `NVML_SUCCESS`, else the typed error with NVML's own message.
fn check(api: &Api, call: &'static str, raw: Return) -> Result<(), NvmlError> {
    NvmlCode::check(raw).map_err(|code| NvmlError::Call {
        call,
        code,
        message: error_string(api, raw).unwrap_or_else(|| code.description().to_owned()),
    })
}

fn error_string(api: &Api, raw: Return) -> Option<String> {
    // SAFETY: nvmlErrorString accepts any code and returns a pointer to a
    // static NUL-terminated string (or null, checked below).
    let text = unsafe { (api.error_string)(raw) };
    if text.is_null() {
        return None;
    }
    // SAFETY: not null, NUL-terminated and static, as above.
    let text = unsafe { CStr::from_ptr(text) };
    text.to_str().ok().map(str::to_owned)
}
