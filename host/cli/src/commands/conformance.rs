//! `switchyard carrier conformance`: the suite every carrier passes, on a
//! plugin author's component, against the server its configuration names.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use switchyard_carrier::conformance::Passed;
use switchyard_carrier::{CarrierSetup, ComponentSpec};
use switchyard_runtime::{Runtime, RuntimeConfig};

pub async fn run(
    component: PathBuf,
    config: PathBuf,
    database_url: Option<String>,
) -> anyhow::Result<ExitCode> {
    let bytes =
        std::fs::read(&component).with_context(|| format!("reading {}", component.display()))?;
    let config = std::fs::read_to_string(&config)
        .with_context(|| format!("reading {}", config.display()))?;
    let name = component
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("carrier");
    let component = ComponentSpec::new(name, "local", bytes);
    let setup = CarrierSetup {
        allowed_endpoints: switchyard_carrier::endpoints_named_by(&config, database_url.as_deref()),
        config,
        database_url,
    };
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let results = switchyard_carrier::conformance::run(component, setup, runtime)
        .await
        .map_err(anyhow::Error::msg)?;
    let mut failed = 0;
    for result in &results {
        let (mark, detail) = match &result.outcome {
            Ok(Passed::Yes) => ("pass", String::new()),
            Ok(Passed::NotServed) => ("n/a ", " (not served by this carrier)".to_string()),
            Err(e) => {
                failed += 1;
                ("FAIL", format!(": {e}"))
            }
        };
        println!(
            "{mark}  {:<60} {:>8.1} ms{detail}",
            result.name,
            result.elapsed.as_secs_f64() * 1e3
        );
    }
    println!(
        "{} of {} checks passed",
        results.len() - failed,
        results.len()
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
