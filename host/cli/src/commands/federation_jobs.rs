//! `switchyard federation maintenance|drain|undrain`: whether peers may
//! choose this cluster as the owner of new jobs. Nothing moves: running
//! jobs stay on their owner; `drain --wait` returns once they have ended.

use std::process::ExitCode;
use std::time::Duration;

use reqwest::Method;
use switchyard_protocol::jobs::{Eligibility, OwnerEligibility, SetEligibility};

use super::federation::print_json;
use crate::cli::federation::EligibilityChange;
use crate::client::Client;

/// How often `drain --wait` looks at the jobs left.
const POLL: Duration = Duration::from_secs(1);

/// Sets the eligibility; with `wait`, then waits for the jobs to end.
pub async fn eligibility(
    state: Eligibility,
    change: EligibilityChange,
    wait: bool,
) -> anyhow::Result<ExitCode> {
    let out = change.out;
    let client = Client::new(&out.api);
    let body = SetEligibility {
        state,
        reason: change.reason,
    };
    let mut now: OwnerEligibility = serde_json::from_value(
        client
            .send_json(Method::PUT, "/api/federation/eligibility", &body)
            .await?,
    )?;
    if !out.json {
        println!("{}", render(&now));
    }
    let mut shown = now.active_jobs;
    while wait && now.active_jobs > 0 {
        tokio::time::sleep(POLL).await;
        now = serde_json::from_value(
            client
                .send(client.request(Method::GET, "/api/federation/eligibility"))
                .await?,
        )?;
        if !out.json && now.active_jobs != shown {
            shown = now.active_jobs;
            println!("{} jobs still running", now.active_jobs);
        }
    }
    if out.json {
        return print_json(&serde_json::to_value(&now)?);
    }
    if wait {
        println!("drained: no job of this cluster is running");
    }
    Ok(ExitCode::SUCCESS)
}

fn render(now: &OwnerEligibility) -> String {
    let who = match now.state {
        Eligibility::Eligible => "peers may choose this cluster as the owner of new jobs",
        Eligibility::Maintenance | Eligibility::Draining => {
            "peers may not choose this cluster as the owner of new jobs"
        }
    };
    let reason = match now.reason.is_empty() {
        true => String::new(),
        false => format!(" ({})", now.reason),
    };
    format!(
        "{}{reason}: {who}; {} jobs of this cluster running",
        now.state, now.active_jobs
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_says_what_peers_may_do() {
        let now = OwnerEligibility {
            state: Eligibility::Draining,
            reason: "host maintenance".into(),
            changed_at: String::new(),
            active_jobs: 2,
        };
        assert_eq!(
            render(&now),
            "draining (host maintenance): peers may not choose this cluster as the owner of \
             new jobs; 2 jobs of this cluster running"
        );
    }
}
