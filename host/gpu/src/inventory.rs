//! What a worker reports about its GPUs.

use serde::{Deserialize, Serialize};

/// One GPU, as a worker reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    /// The index NVML and nvidia-smi give it (PCI bus order, which CUDA
    /// follows only with `CUDA_DEVICE_ORDER=PCI_BUS_ID`; the UUID is the
    /// unambiguous name); for a declared inventory, the order of declaration.
    pub index: u32,
    /// The model, as the driver names it (`NVIDIA H200`).
    pub name: String,
    /// The driver's stable id (`GPU-5f0c…`), when it gives one.
    pub uuid: Option<String>,
    /// Memory on the device, in bytes.
    pub memory_total_bytes: u64,
    /// Memory in use, in bytes, when known (never for a declared GPU).
    pub memory_used_bytes: Option<u64>,
}

impl Gpu {
    /// Memory not in use, in bytes, when the memory in use is known.
    pub fn memory_free_bytes(&self) -> Option<u64> {
        self.memory_used_bytes
            .map(|used| self.memory_total_bytes.saturating_sub(used))
    }
}

/// Where an inventory came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// NVML, through the driver's shared library.
    Nvml,
    /// The output of `nvidia-smi`.
    NvidiaSmi,
    /// Declared by the operator (`--gpu`, or a file).
    Declared,
    /// No GPU stack answered: the inventory is empty.
    None,
}

impl Source {
    /// The name used on the wire and in logs (`nvidia_smi`).
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Nvml => "nvml",
            Source::NvidiaSmi => "nvidia_smi",
            Source::Declared => "declared",
            Source::None => "none",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A worker's GPUs and where the list came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inventory {
    /// Where the list came from.
    pub source: Source,
    /// The GPUs, in index order.
    pub gpus: Vec<Gpu>,
}

impl Inventory {
    /// An empty inventory: no GPU stack answered.
    pub fn none() -> Self {
        Inventory {
            source: Source::None,
            gpus: Vec::new(),
        }
    }

    /// The memory of all GPUs together, in bytes.
    pub fn total_memory_bytes(&self) -> u64 {
        self.gpus
            .iter()
            .fold(0, |sum, gpu| sum.saturating_add(gpu.memory_total_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, total: u64, used: Option<u64>) -> Gpu {
        Gpu {
            index,
            name: "NVIDIA H200".into(),
            uuid: None,
            memory_total_bytes: total,
            memory_used_bytes: used,
        }
    }

    #[test]
    fn total_memory_sums_every_gpu() {
        let inventory = Inventory {
            source: Source::Nvml,
            gpus: vec![gpu(0, 100, Some(1)), gpu(1, 50, None)],
        };
        assert_eq!(inventory.total_memory_bytes(), 150);
        assert_eq!(Inventory::none().total_memory_bytes(), 0);
    }

    #[test]
    fn total_memory_saturates_instead_of_overflowing() {
        let inventory = Inventory {
            source: Source::Declared,
            gpus: vec![gpu(0, u64::MAX, None), gpu(1, 1, None)],
        };
        assert_eq!(inventory.total_memory_bytes(), u64::MAX);
    }

    #[test]
    fn free_memory_is_known_only_with_used_memory() {
        assert_eq!(gpu(0, 100, Some(30)).memory_free_bytes(), Some(70));
        assert_eq!(gpu(0, 100, None).memory_free_bytes(), None);
    }

    #[test]
    fn sources_are_snake_case_on_the_wire() {
        for source in [
            Source::Nvml,
            Source::NvidiaSmi,
            Source::Declared,
            Source::None,
        ] {
            let json = serde_json::to_string(&source).unwrap();
            assert_eq!(json, format!("\"{}\"", source.as_str()));
            assert_eq!(serde_json::from_str::<Source>(&json).unwrap(), source);
        }
        assert_eq!(Source::NvidiaSmi.to_string(), "nvidia_smi");
    }

    #[test]
    fn an_inventory_round_trips_through_json() {
        let inventory = Inventory {
            source: Source::NvidiaSmi,
            gpus: vec![Gpu {
                uuid: Some("GPU-1".into()),
                ..gpu(0, 1 << 30, Some(1 << 20))
            }],
        };
        let json = serde_json::to_value(&inventory).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "source": "nvidia_smi",
                "gpus": [{
                    "index": 0,
                    "name": "NVIDIA H200",
                    "uuid": "GPU-1",
                    "memory_total_bytes": 1u64 << 30,
                    "memory_used_bytes": 1u64 << 20,
                }],
            })
        );
        assert_eq!(
            serde_json::from_value::<Inventory>(json).unwrap(),
            inventory
        );
    }
}
