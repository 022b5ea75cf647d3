//! Where a replica fits: filter the nodes that can hold it, fit its GPUs on
//! one node, score (binpack, with a bonus for a node that already holds the
//! files). Pure: the reconciler gathers the views.

use std::collections::BTreeSet;

/// One GPU as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuView {
    /// Its index on the node.
    pub index: u32,
    /// Total memory.
    pub memory_total_bytes: u64,
}

/// One node as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// Its id.
    pub id: String,
    /// Heartbeating, approved, not draining.
    pub schedulable: bool,
    /// Its GPUs.
    pub gpus: Vec<GpuView>,
    /// GPU indices replicas already hold.
    pub used: BTreeSet<u32>,
    /// Free disk under its data directory, if reported.
    pub disk_available_bytes: Option<u64>,
    /// Whether its placement cache already holds the model's files.
    pub holds_files: bool,
    /// Replicas of the same deployment already on it.
    pub siblings: u32,
}

/// What one replica needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// GPUs, all on one node.
    pub gpus: u32,
    /// Memory each of them must have.
    pub memory_per_gpu: u64,
    /// Bytes of the model's files (disk, unless the node holds them).
    pub model_bytes: u64,
    /// Fill the fullest node (binpack) or the emptiest (spread).
    pub spread: bool,
}

/// The chosen node and GPU indices, or why none.
pub fn place(nodes: &[NodeView], need: Need) -> Result<(String, Vec<u32>), String> {
    let mut best: Option<(i64, String, Vec<u32>)> = None;
    let mut reasons = Vec::new();
    for node in nodes {
        if !node.schedulable {
            reasons.push(format!("{}: not schedulable", node.id));
            continue;
        }
        if !node.holds_files
            && node
                .disk_available_bytes
                .is_some_and(|free| free < need.model_bytes)
        {
            reasons.push(format!("{}: not enough disk for the files", node.id));
            continue;
        }
        let free: Vec<u32> = node
            .gpus
            .iter()
            .filter(|g| {
                !node.used.contains(&g.index) && g.memory_total_bytes >= need.memory_per_gpu
            })
            .map(|g| g.index)
            .collect();
        if (free.len() as u32) < need.gpus {
            reasons.push(format!(
                "{}: {} suitable free GPUs, {} needed",
                node.id,
                free.len(),
                need.gpus
            ));
            continue;
        }
        let chosen: Vec<u32> = free.iter().take(need.gpus as usize).copied().collect();
        // Binpack: the fewer GPUs left free, the better; spread: the more,
        // and the fewer replicas of the same deployment. Files already there win ties.
        let left = (free.len() as u32 - need.gpus) as i64;
        let fill = if need.spread {
            left * 10 - i64::from(node.siblings) * 100
        } else {
            -left * 10
        };
        let score = fill + if node.holds_files { 5 } else { 0 };
        if best
            .as_ref()
            .is_none_or(|(s, id, _)| score > *s || (score == *s && node.id < *id))
        {
            best = Some((score, node.id.clone(), chosen));
        }
    }
    best.map(|(_, id, gpus)| (id, gpus)).ok_or_else(|| {
        if reasons.is_empty() {
            "no nodes".into()
        } else {
            reasons.join("; ")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, gpus: u32, used: &[u32]) -> NodeView {
        NodeView {
            id: id.into(),
            schedulable: true,
            gpus: (0..gpus)
                .map(|index| GpuView {
                    index,
                    memory_total_bytes: 80 << 30,
                })
                .collect(),
            used: used.iter().copied().collect(),
            disk_available_bytes: Some(1 << 40),
            holds_files: false,
            siblings: 0,
        }
    }

    const ONE: Need = Need {
        gpus: 1,
        memory_per_gpu: 40 << 30,
        model_bytes: 1 << 30,
        spread: false,
    };

    #[test]
    fn spread_prefers_the_emptiest_node_and_avoids_siblings() {
        let spread = Need {
            spread: true,
            ..ONE
        };
        let nodes = [node("a", 4, &[]), node("b", 4, &[0, 1, 2])];
        assert_eq!(place(&nodes, spread).unwrap().0, "a");
        let mut with_sibling = node("a", 4, &[0]);
        with_sibling.siblings = 1;
        assert_eq!(
            place(&[with_sibling, node("b", 2, &[])], spread).unwrap().0,
            "b"
        );
    }

    #[test]
    fn binpacks_onto_the_fullest_node_that_fits() {
        let nodes = [node("a", 4, &[]), node("b", 4, &[0, 1, 2])];
        assert_eq!(place(&nodes, ONE).unwrap(), ("b".into(), vec![3]));
    }

    #[test]
    fn several_gpus_fit_on_one_node_only() {
        let nodes = [node("a", 2, &[0]), node("b", 2, &[1])];
        let two = Need { gpus: 2, ..ONE };
        let why = place(&nodes, two).unwrap_err();
        assert!(why.contains("1 suitable free GPUs, 2 needed"), "{why}");
        assert_eq!(
            place(&[node("c", 4, &[1])], two).unwrap(),
            ("c".into(), vec![0, 2])
        );
    }

    #[test]
    fn memory_disk_and_schedulability_filter() {
        let mut small = node("small", 1, &[]);
        small.gpus[0].memory_total_bytes = 16 << 30;
        let mut full_disk = node("disk", 1, &[]);
        full_disk.disk_available_bytes = Some(1);
        let mut drained = node("drained", 1, &[]);
        drained.schedulable = false;
        assert!(place(&[small, full_disk.clone(), drained], ONE).is_err());
        // A node already holding the files needs no disk for them.
        full_disk.holds_files = true;
        assert_eq!(place(&[full_disk], ONE).unwrap().0, "disk");
    }

    #[test]
    fn gpu_less_replicas_fit_anywhere_schedulable() {
        let none = Need { gpus: 0, ..ONE };
        assert_eq!(
            place(&[node("cpu", 0, &[])], none).unwrap(),
            ("cpu".into(), vec![])
        );
    }

    #[test]
    fn files_already_there_break_ties() {
        let mut warm = node("warm", 2, &[]);
        warm.holds_files = true;
        assert_eq!(place(&[node("cold", 2, &[]), warm], ONE).unwrap().0, "warm");
    }
}
