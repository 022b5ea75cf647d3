//! The plugin platform end to end: real PostgreSQL, the real built
//! components, replicas in-process and as real processes.

mod api_fuzz;
mod api_input;
mod auth;
mod batch_owners;
mod batches;
mod carrier_cli;
mod carrier_components;
mod chains;
mod cli;
mod console;
mod console_control;
mod decisions;
mod deployment_preview;
mod edge;
mod embedded;
mod engines;
mod evaluator;
mod federation_cli;
mod fetch;
mod grants;
mod llama_cpp;
mod models;
mod nodes;
mod openai_errors;
mod openapi;
mod plugin_signing;
mod policy_languages;
mod registry;
mod replicas;
mod requests;
mod sandbox;
mod scheduling;
mod settings;
mod tls;
mod vllm;
