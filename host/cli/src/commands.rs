//! One module per command.

mod admin;
mod policy_test;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

/// Runs the command; `Ok` carries the exit code.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => {
            let config = crate::config::serve_config(args)?;
            switchyard_server::run(config, switchyard_server::server::shutdown_signal()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy(crate::cli::PolicyCommand::Test(args)) => policy_test::run(args),
        Command::Plugin(c) => admin::plugin(c).await,
        Command::Admission(c) => admin::admission(c).await,
        Command::Key(c) => admin::key(c).await,
    }
}
