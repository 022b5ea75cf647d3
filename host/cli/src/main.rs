//! `switchyard`: parses arguments and hands over to a command.

use std::process::ExitCode;

use clap::Parser;

mod built_in;
mod cli;
mod client;
mod commands;
mod config;
mod signal;

fn main() -> ExitCode {
    switchyard_carrier::allocator::keep_freed_buffers();
    let cli = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("info,wasmtime=warn,cranelift=warn")
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    match commands::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
