//! NVML's return codes (`nvmlReturn_t`) as a typed error.

/// A return code other than `NVML_SUCCESS`, as `nvml.h` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NvmlCode {
    /// `NVML_ERROR_UNINITIALIZED` (1).
    Uninitialized,
    /// `NVML_ERROR_INVALID_ARGUMENT` (2).
    InvalidArgument,
    /// `NVML_ERROR_NOT_SUPPORTED` (3).
    NotSupported,
    /// `NVML_ERROR_NO_PERMISSION` (4).
    NoPermission,
    /// `NVML_ERROR_ALREADY_INITIALIZED` (5).
    AlreadyInitialized,
    /// `NVML_ERROR_NOT_FOUND` (6).
    NotFound,
    /// `NVML_ERROR_INSUFFICIENT_SIZE` (7).
    InsufficientSize,
    /// `NVML_ERROR_INSUFFICIENT_POWER` (8).
    InsufficientPower,
    /// `NVML_ERROR_DRIVER_NOT_LOADED` (9).
    DriverNotLoaded,
    /// `NVML_ERROR_TIMEOUT` (10).
    Timeout,
    /// `NVML_ERROR_IRQ_ISSUE` (11).
    IrqIssue,
    /// `NVML_ERROR_LIBRARY_NOT_FOUND` (12).
    LibraryNotFound,
    /// `NVML_ERROR_FUNCTION_NOT_FOUND` (13).
    FunctionNotFound,
    /// `NVML_ERROR_CORRUPTED_INFOROM` (14).
    CorruptedInforom,
    /// `NVML_ERROR_GPU_IS_LOST` (15).
    GpuIsLost,
    /// `NVML_ERROR_RESET_REQUIRED` (16).
    ResetRequired,
    /// `NVML_ERROR_OPERATING_SYSTEM` (17).
    OperatingSystem,
    /// `NVML_ERROR_LIB_RM_VERSION_MISMATCH` (18).
    LibRmVersionMismatch,
    /// `NVML_ERROR_IN_USE` (19).
    InUse,
    /// `NVML_ERROR_MEMORY` (20).
    Memory,
    /// `NVML_ERROR_NO_DATA` (21).
    NoData,
    /// `NVML_ERROR_VGPU_ECC_NOT_SUPPORTED` (22).
    VgpuEccNotSupported,
    /// `NVML_ERROR_INSUFFICIENT_RESOURCES` (23).
    InsufficientResources,
    /// `NVML_ERROR_FREQ_NOT_SUPPORTED` (24).
    FreqNotSupported,
    /// `NVML_ERROR_ARGUMENT_VERSION_MISMATCH` (25).
    ArgumentVersionMismatch,
    /// `NVML_ERROR_DEPRECATED` (26).
    Deprecated,
    /// `NVML_ERROR_NOT_READY` (27).
    NotReady,
    /// `NVML_ERROR_GPU_NOT_FOUND` (28).
    GpuNotFound,
    /// `NVML_ERROR_INVALID_STATE` (29).
    InvalidState,
    /// `NVML_ERROR_UNKNOWN` (999).
    Unknown,
    /// A code newer than this table.
    Other(i32),
}

/// Every known code: its value, its name in `nvml.h`, and what it means there.
// One row per code reads as the table in `nvml.h` does.
#[rustfmt::skip]
const CODES: [(i32, NvmlCode, &str, &str); 30] = [
    (1, NvmlCode::Uninitialized, "NVML_ERROR_UNINITIALIZED", "NVML was not initialized"),
    (2, NvmlCode::InvalidArgument, "NVML_ERROR_INVALID_ARGUMENT", "an argument is invalid"),
    (3, NvmlCode::NotSupported, "NVML_ERROR_NOT_SUPPORTED", "the device does not support this"),
    (4, NvmlCode::NoPermission, "NVML_ERROR_NO_PERMISSION", "this user may not do this"),
    (5, NvmlCode::AlreadyInitialized, "NVML_ERROR_ALREADY_INITIALIZED", "NVML is already initialized"),
    (6, NvmlCode::NotFound, "NVML_ERROR_NOT_FOUND", "the object was not found"),
    (7, NvmlCode::InsufficientSize, "NVML_ERROR_INSUFFICIENT_SIZE", "a buffer is too small"),
    (8, NvmlCode::InsufficientPower, "NVML_ERROR_INSUFFICIENT_POWER", "a GPU's external power cables are not attached"),
    (9, NvmlCode::DriverNotLoaded, "NVML_ERROR_DRIVER_NOT_LOADED", "the NVIDIA kernel driver is not loaded"),
    (10, NvmlCode::Timeout, "NVML_ERROR_TIMEOUT", "the call timed out"),
    (11, NvmlCode::IrqIssue, "NVML_ERROR_IRQ_ISSUE", "the kernel found an interrupt problem with a GPU"),
    (12, NvmlCode::LibraryNotFound, "NVML_ERROR_LIBRARY_NOT_FOUND", "a library NVML needs was not found"),
    (13, NvmlCode::FunctionNotFound, "NVML_ERROR_FUNCTION_NOT_FOUND", "this NVML does not implement the function"),
    (14, NvmlCode::CorruptedInforom, "NVML_ERROR_CORRUPTED_INFOROM", "a GPU's infoROM is corrupted"),
    (15, NvmlCode::GpuIsLost, "NVML_ERROR_GPU_IS_LOST", "a GPU fell off the bus or became unreachable"),
    (16, NvmlCode::ResetRequired, "NVML_ERROR_RESET_REQUIRED", "a GPU needs a reset"),
    (17, NvmlCode::OperatingSystem, "NVML_ERROR_OPERATING_SYSTEM", "the operating system or a cgroup blocked the GPU"),
    (18, NvmlCode::LibRmVersionMismatch, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", "the NVML library and the kernel driver differ in version (reboot or reload the driver after an upgrade)"),
    (19, NvmlCode::InUse, "NVML_ERROR_IN_USE", "the GPU is in use"),
    (20, NvmlCode::Memory, "NVML_ERROR_MEMORY", "out of memory"),
    (21, NvmlCode::NoData, "NVML_ERROR_NO_DATA", "no data"),
    (22, NvmlCode::VgpuEccNotSupported, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", "not available for a vGPU with ECC enabled"),
    (23, NvmlCode::InsufficientResources, "NVML_ERROR_INSUFFICIENT_RESOURCES", "not enough resources"),
    (24, NvmlCode::FreqNotSupported, "NVML_ERROR_FREQ_NOT_SUPPORTED", "the frequency is not supported"),
    (25, NvmlCode::ArgumentVersionMismatch, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", "an argument's struct version is not supported"),
    (26, NvmlCode::Deprecated, "NVML_ERROR_DEPRECATED", "the function is deprecated"),
    (27, NvmlCode::NotReady, "NVML_ERROR_NOT_READY", "the system is not ready"),
    (28, NvmlCode::GpuNotFound, "NVML_ERROR_GPU_NOT_FOUND", "no GPU was found"),
    (29, NvmlCode::InvalidState, "NVML_ERROR_INVALID_STATE", "the resource is in an invalid state"),
    (999, NvmlCode::Unknown, "NVML_ERROR_UNKNOWN", "an internal driver error"),
];

/// `NVML_SUCCESS`.
const SUCCESS: i32 = 0;

impl NvmlCode {
    /// The code a call returned: `Ok` for `NVML_SUCCESS`.
    pub fn check(raw: i32) -> Result<(), NvmlCode> {
        if raw == SUCCESS {
            return Ok(());
        }
        let known = CODES.iter().find(|(value, ..)| *value == raw);
        Err(known.map_or(NvmlCode::Other(raw), |&(_, code, ..)| code))
    }

    /// The value `nvml.h` gives it.
    pub fn raw(self) -> i32 {
        match self {
            NvmlCode::Other(raw) => raw,
            code => Self::entry(code).map_or(-1, |&(raw, ..)| raw),
        }
    }

    /// Its name in `nvml.h` (`NVML_ERROR_GPU_IS_LOST`).
    pub fn name(self) -> &'static str {
        Self::entry(self).map_or("NVML_ERROR_(newer than this build)", |&(_, _, name, _)| {
            name
        })
    }

    /// What it means, for when NVML's own `nvmlErrorString` is not at hand.
    pub fn description(self) -> &'static str {
        Self::entry(self).map_or("an error this build does not know", |&(.., text)| text)
    }

    fn entry(code: NvmlCode) -> Option<&'static (i32, NvmlCode, &'static str, &'static str)> {
        CODES.iter().find(|(_, known, ..)| *known == code)
    }
}

impl std::fmt::Display for NvmlCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NvmlCode::Other(raw) => write!(f, "NVML error {raw}"),
            code => f.write_str(code.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_is_ok() {
        assert_eq!(NvmlCode::check(0), Ok(()));
    }

    #[test]
    fn the_codes_a_worker_meets_map_to_their_names() {
        let cases = [
            (1, NvmlCode::Uninitialized, "NVML_ERROR_UNINITIALIZED"),
            (2, NvmlCode::InvalidArgument, "NVML_ERROR_INVALID_ARGUMENT"),
            (3, NvmlCode::NotSupported, "NVML_ERROR_NOT_SUPPORTED"),
            (4, NvmlCode::NoPermission, "NVML_ERROR_NO_PERMISSION"),
            (6, NvmlCode::NotFound, "NVML_ERROR_NOT_FOUND"),
            (
                7,
                NvmlCode::InsufficientSize,
                "NVML_ERROR_INSUFFICIENT_SIZE",
            ),
            (9, NvmlCode::DriverNotLoaded, "NVML_ERROR_DRIVER_NOT_LOADED"),
            (15, NvmlCode::GpuIsLost, "NVML_ERROR_GPU_IS_LOST"),
            (
                18,
                NvmlCode::LibRmVersionMismatch,
                "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
            ),
            (999, NvmlCode::Unknown, "NVML_ERROR_UNKNOWN"),
        ];
        for (raw, code, name) in cases {
            assert_eq!(NvmlCode::check(raw), Err(code));
            assert_eq!(code.raw(), raw);
            assert_eq!(code.to_string(), name);
        }
    }

    #[test]
    fn every_code_round_trips_and_is_described() {
        for &(raw, code, name, description) in &CODES {
            assert_eq!(NvmlCode::check(raw), Err(code));
            assert_eq!(code.raw(), raw);
            assert_eq!(code.name(), name);
            assert_eq!(code.description(), description);
        }
    }

    #[test]
    fn a_version_mismatch_says_what_to_do() {
        assert!(
            NvmlCode::LibRmVersionMismatch
                .description()
                .contains("reboot")
        );
    }

    #[test]
    fn codes_newer_than_the_table_keep_their_value() {
        assert_eq!(NvmlCode::check(30), Err(NvmlCode::Other(30)));
        assert_eq!(NvmlCode::Other(30).raw(), 30);
        assert_eq!(NvmlCode::Other(30).to_string(), "NVML error 30");
        assert_eq!(NvmlCode::check(-5), Err(NvmlCode::Other(-5)));
    }
}
