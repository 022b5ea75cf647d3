//! `switchyard batch ...`: the arguments. Each command is a thin client of
//! the OpenAI Batch API (`/v1/files`, `/v1/batches`); the commands live in
//! `commands/batch.rs`. `--json` prints the API's JSON as it is.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::ApiArgs;

/// `switchyard batch`.
#[derive(Debug, Subcommand)]
pub enum BatchCommand {
    /// Upload a JSONL file (one request a line:
    /// `{"custom_id", "method": "POST", "url", "body"}`) and run it as a batch.
    Create {
        /// The JSONL file.
        file: PathBuf,
        /// The endpoint every line calls.
        #[arg(long, default_value = "/v1/chat/completions")]
        endpoint: String,
        /// The cluster that owns the batch (kept as `metadata.owner`).
        #[arg(long, value_name = "LABEL")]
        owner: Option<String>,
        /// More metadata, `key=value` (repeat; at most 16 keys in all).
        #[arg(long = "metadata", value_name = "KEY=VALUE", value_parser = pair)]
        metadata: Vec<(String, String)>,
        /// Then show its progress until it ends (exit 0 if it completed).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        out: BatchOutput,
    },
    /// One batch: its status and counts.
    Get {
        /// The batch id (`batch_…`).
        id: String,
        #[command(flatten)]
        out: BatchOutput,
    },
    /// Batches, the newest first.
    List {
        /// Start after this batch id (the previous page's last).
        #[arg(long)]
        after: Option<String>,
        /// Batches to show, 1 to 100.
        #[arg(long, default_value_t = 20)]
        limit: i64,
        #[command(flatten)]
        out: BatchOutput,
    },
    /// Cancel a batch: lines not yet running never run.
    Cancel {
        /// The batch id.
        id: String,
        #[command(flatten)]
        out: BatchOutput,
    },
    /// Print a batch's output file (JSONL) to stdout.
    Output {
        /// The batch id.
        id: String,
        /// The error file instead (lines that failed).
        #[arg(long)]
        errors: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// Where and how.
#[derive(Debug, Args)]
pub struct BatchOutput {
    /// Print the API's JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub api: ApiArgs,
}

fn pair(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("`{text}` is not KEY=VALUE"))
}
