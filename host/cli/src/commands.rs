//! One module per command.

mod accounts;
mod admin;
mod admission_decisions;
mod batch;
mod carrier;
mod cluster_settings;
mod conformance;
mod deployment_watch;
mod federation;
mod federation_copies;
mod federation_evaluator;
mod federation_grants;
mod federation_jobs;
mod federation_services;
mod model;
mod model_fetch;
mod plugin_sign;
mod policy_cases;
mod policy_new;
mod policy_test;
mod policy_watch;
mod progress;
mod trust;
mod up;
mod up_policies;

pub use admission_decisions::DecisionsArgs;

use std::future::Future;
use std::process::ExitCode;

use crate::cli::{CarrierCommand, Cli, ClusterCommand, Command, EngineCommand, PolicyCommand};

/// Runs the command; `Ok` carries the exit code.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        // Plugins run synchronously, and WASI's synchronous host calls (a
        // guest writing to stderr) must not run on an async worker: the
        // offline tester needs no tokio runtime at all.
        Command::Policy(PolicyCommand::Test(args)) => policy_test::run(args),
        Command::Policy(PolicyCommand::New(args)) => policy_new::run(args),
        Command::Serve(args) => block_on(async {
            let mut config = crate::config::serve_config(args)?;
            config.pages = Some(switchyard_console::router);
            switchyard_server::run(config, crate::signal::shutdown_signal()).await?;
            Ok(ExitCode::SUCCESS)
        }),
        Command::Up(args) => block_on(up::up(args)),
        Command::Worker(args) => block_on(async {
            let config = switchyard_worker::WorkerConfig {
                frontend: args.frontend,
                registration_token: args.registration_token,
                data_dir: args.data_dir,
                name: args
                    .name
                    .unwrap_or_else(switchyard_worker::inventory::hostname),
                address: args.address,
                heartbeat_interval: std::time::Duration::from_millis(args.heartbeat_ms),
                carrier_plugins: args.carrier_plugins,
                nats_url: args.nats_url.filter(|u| !u.is_empty()),
                gpus: declared_gpus(args.gpus, args.gpu_file.as_deref())?,
                disk_reserve_bytes: args.disk_reserve_mib << 20,
                labels: args.labels.into_iter().collect(),
                engine_start: switchyard_worker::node::EngineStartPolicy {
                    extra_args: args.allow_engine_args.into_iter().collect(),
                    env: args.allow_engine_env.into_iter().collect(),
                    model_roots: args.allow_engine_model_roots,
                },
                otlp_endpoint: args.otlp_endpoint,
            };
            switchyard_worker::run(config, crate::signal::shutdown_signal()).await?;
            Ok(ExitCode::SUCCESS)
        }),
        Command::Node(c) => block_on(admin::node(c)),
        Command::Model(c) => block_on(model::model(c)),
        Command::Deployment(c) => block_on(admin::deployment(c)),
        Command::Engine(EngineCommand::Reference {
            model,
            served_model_name,
            listen,
            token_delay_ms,
            first_token_delay_ms,
            max_concurrency,
        }) => block_on(async move {
            let config = switchyard_reference_engine::ReferenceConfig {
                served_model_name,
                listen,
                token_delay: std::time::Duration::from_millis(token_delay_ms),
                first_token_delay: std::time::Duration::from_millis(first_token_delay_ms),
                max_concurrency,
                ..switchyard_reference_engine::ReferenceConfig::new(model)
            };
            switchyard_reference_engine::run(config, crate::signal::shutdown_signal()).await?;
            Ok(ExitCode::SUCCESS)
        }),
        Command::Carrier(CarrierCommand::Conformance {
            component,
            config,
            database_url,
        }) => block_on(conformance::run(component, config, database_url)),
        Command::Carrier(CarrierCommand::Status { json, api }) => {
            block_on(carrier::status(json, api))
        }
        Command::Carrier(CarrierCommand::Switch(args)) => block_on(carrier::switch(args)),
        Command::Carrier(CarrierCommand::Abort { api }) => block_on(carrier::abort(api)),
        Command::Cluster(ClusterCommand::Settings(c)) => block_on(cluster_settings::settings(c)),
        Command::Plugin(c) => block_on(admin::plugin(c)),
        Command::Trust(c) => block_on(trust::trust(c)),
        Command::Admission(c) => block_on(admin::admission(c)),
        Command::Key(c) => block_on(admin::key(c)),
        Command::Team(c) => block_on(accounts::team(c)),
        Command::Audit(c) => block_on(accounts::audit(c)),
        Command::Usage(args) => block_on(accounts::usage(args)),
        Command::Federation(c) => block_on(federation::federation(c)),
        Command::Batch(c) => block_on(batch::batch(c)),
    }
}

fn block_on<T>(future: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Runtime::new()?.block_on(future)
}

/// The GPUs declared with `--gpu` and `--gpu-file`, indexed in that order.
fn declared_gpus(
    specs: Vec<switchyard_gpu::GpuSpec>,
    file: Option<&std::path::Path>,
) -> anyhow::Result<Vec<switchyard_gpu::Gpu>> {
    let mut all = specs;
    if let Some(file) = file {
        all.extend(switchyard_gpu::declared::read_file(file)?);
    }
    Ok(switchyard_gpu::declared::expand(&all))
}
