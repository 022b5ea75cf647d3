//! `switchyard team ...` and `switchyard audit ...`: the arguments. The
//! commands (`commands/accounts.rs`) are thin clients of `/api/teams` and
//! `/api/audit`.

use clap::Subcommand;

use super::ApiArgs;

/// `switchyard team`.
#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// Create a team (then `switchyard key create --team NAME`).
    Create {
        /// Its name.
        name: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List teams and their live keys.
    List {
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Delete a team no live key is in.
    Delete {
        /// Its name.
        name: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// `switchyard audit`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// The admin changes recorded, oldest first (the newest `--limit`
    /// without `--since`).
    List {
        /// A record's seq (the records after it) or an RFC 3339 time.
        #[arg(long)]
        since: Option<String>,
        /// Only changes by this key id.
        #[arg(long)]
        actor: Option<String>,
        /// Only changes to this object.
        #[arg(long)]
        object: Option<String>,
        /// Records to show, 1 to 1000 [default: 100].
        #[arg(long)]
        limit: Option<u32>,
        /// Print the API's JSON as it is.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Walk the chain of digests; exit 1 and name the first record that
    /// was altered, removed or relinked.
    Verify {
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// `switchyard usage`: the tokens metered, summed.
#[derive(Debug, clap::Args)]
pub struct UsageArgs {
    /// Dimensions to group by, comma-separated: team, key, model, peer, node.
    #[arg(long, default_value = "team,model")]
    pub group_by: String,
    /// Events at or after this RFC 3339 time.
    #[arg(long)]
    pub from: Option<String>,
    /// Events before this RFC 3339 time.
    #[arg(long)]
    pub to: Option<String>,
    /// minute, hour or day.
    #[arg(long, default_value = "day")]
    pub granularity: String,
    /// Print CSV (as `Accept: text/csv` answers it).
    #[arg(long)]
    pub csv: bool,
    #[command(flatten)]
    pub api: ApiArgs,
}
