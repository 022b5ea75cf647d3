//! Log lines through the host's logger.
//!
//! In a component these call the `switchyard:plugin/log` import, which tags
//! each line with the plugin's name and version. Natively (tests, tools)
//! they print to stderr, because the import exists only inside a host.

use crate::LogLevel;

/// Writes one line at `level`. The host bounds the length it keeps.
pub fn log(level: LogLevel, message: impl AsRef<str>) {
    let message = message.as_ref();
    #[cfg(target_arch = "wasm32")]
    crate::bindings::switchyard::plugin::log::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{}] {message}", level_name(level));
}

#[cfg(not(target_arch = "wasm32"))]
fn level_name(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Trace => "trace",
        LogLevel::Debug => "debug",
        LogLevel::Info => "info",
        LogLevel::Warn => "warn",
        LogLevel::Error => "error",
    }
}

/// Writes a `trace` line.
pub fn trace(message: impl AsRef<str>) {
    log(LogLevel::Trace, message);
}

/// Writes a `debug` line.
pub fn debug(message: impl AsRef<str>) {
    log(LogLevel::Debug, message);
}

/// Writes an `info` line.
pub fn info(message: impl AsRef<str>) {
    log(LogLevel::Info, message);
}

/// Writes a `warn` line.
pub fn warn(message: impl AsRef<str>) {
    log(LogLevel::Warn, message);
}

/// Writes an `error` line.
pub fn error(message: impl AsRef<str>) {
    log(LogLevel::Error, message);
}
