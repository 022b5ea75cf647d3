//! Which GPUs this machine has: declared, else NVML, else nvidia-smi, else none.

use std::path::Path;
use std::time::Duration;

use tracing::{debug, info, warn};

use crate::inventory::{Gpu, Inventory, Source};
use crate::nvml::{self, Nvml, NvmlError};
use crate::smi::{self, SmiError};

/// Where each step looks; the real stack, or a fake one in tests.
struct Probes<'a> {
    nvml_libraries: &'a [&'a str],
    smi_program: &'a Path,
    smi_timeout: Duration,
}

impl Probes<'static> {
    /// The machine's own driver and tools.
    fn system() -> Self {
        Probes {
            nvml_libraries: &nvml::LIBRARY_NAMES,
            smi_program: Path::new(smi::PROGRAM),
            smi_timeout: smi::TIMEOUT,
        }
    }
}

/// This machine's GPUs.
///
/// A non-empty `declared` list wins and nothing is asked. Otherwise NVML is
/// asked, then `nvidia-smi`; a step that cannot answer is logged and skipped,
/// and when none can the inventory is empty with [`Source::None`]. It never
/// fails: a machine without a GPU stack is still a worker.
///
/// It blocks (for up to [`smi::TIMEOUT`] if `nvidia-smi` hangs); call it from
/// `spawn_blocking` in async code.
pub fn detect(declared: &[Gpu]) -> Inventory {
    detect_with(declared, &Probes::system())
}

fn detect_with(declared: &[Gpu], probes: &Probes<'_>) -> Inventory {
    if !declared.is_empty() {
        return found(Source::Declared, declared.to_vec());
    }
    match Nvml::open_from(probes.nvml_libraries).and_then(|nvml| nvml.gpus()) {
        Ok(gpus) => return found(Source::Nvml, gpus),
        Err(error @ NvmlError::LibraryNotFound { .. }) => {
            debug!(%error, "NVML skipped: no NVIDIA driver library");
        }
        // The driver is there but does not answer: the operator should hear.
        Err(error) => warn!(%error, "NVML failed; trying nvidia-smi"),
    }
    match smi::query_with(probes.smi_program, probes.smi_timeout) {
        Ok(gpus) => return found(Source::NvidiaSmi, gpus),
        Err(error @ SmiError::NotInstalled { .. }) => {
            debug!(%error, "nvidia-smi skipped: not installed");
        }
        Err(error) => warn!(%error, "nvidia-smi failed"),
    }
    info!("no GPUs: none declared, and neither NVML nor nvidia-smi answered");
    Inventory::none()
}

fn found(source: Source, gpus: Vec<Gpu>) -> Inventory {
    let inventory = Inventory { source, gpus };
    info!(
        source = %inventory.source,
        gpus = inventory.gpus.len(),
        memory_bytes = inventory.total_memory_bytes(),
        "GPU inventory"
    );
    inventory
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fake_program;

    const ABSENT_NVML: &[&str] = &["/nonexistent/libnvidia-ml.so.1"];

    fn probes<'a>(nvml_libraries: &'a [&'a str], smi_program: &'a Path) -> Probes<'a> {
        Probes {
            nvml_libraries,
            smi_program,
            smi_timeout: Duration::from_secs(5),
        }
    }

    fn declared() -> Vec<Gpu> {
        crate::declared::expand(&["name=H200,memory=141GiB,count=2".parse().unwrap()])
    }

    #[test]
    fn declared_gpus_win() {
        let inventory = detect(&declared());
        assert_eq!(inventory.source, Source::Declared);
        assert_eq!(inventory.gpus, declared());
        assert_eq!(inventory.total_memory_bytes(), 2 * 141 * (1 << 30));
    }

    #[test]
    fn nothing_at_all_is_an_empty_inventory() {
        let missing = Path::new("/nonexistent/nvidia-smi");
        assert_eq!(
            detect_with(&[], &probes(ABSENT_NVML, missing)),
            Inventory::none()
        );
    }

    #[test]
    fn nvidia_smi_answers_when_nvml_cannot() {
        let dir = tempfile::tempdir().unwrap();
        let program = fake_program(dir.path(), "echo '0, NVIDIA L4, GPU-1, 23034, 0'");
        let inventory = detect_with(&[], &probes(ABSENT_NVML, &program));
        assert_eq!(inventory.source, Source::NvidiaSmi);
        assert_eq!(inventory.gpus.len(), 1);
        assert_eq!(inventory.gpus[0].memory_total_bytes, 23_034 << 20);
    }

    #[test]
    fn a_broken_stack_is_an_empty_inventory_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let program = fake_program(
            dir.path(),
            "echo 'Failed to initialize NVML: Driver/library version mismatch'; exit 18",
        );
        // libc loads but is not NVML: the "present but failing" path.
        let libraries: &[&str] = if cfg!(all(target_os = "linux", target_env = "gnu")) {
            &["libc.so.6"]
        } else {
            ABSENT_NVML
        };
        assert_eq!(
            detect_with(&[], &probes(libraries, &program)),
            Inventory::none()
        );
    }
}
