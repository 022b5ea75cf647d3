//! Where a replica fits: filter the nodes that can hold it (schedulable,
//! labels matching the deployment's node selector, disk), fit its GPUs on
//! one node, score (binpack or spread, with a bonus for a node that already
//! holds the files). Pure: the reconciler gathers the views.

use std::collections::BTreeSet;

use switchyard_protocol::labels::{self, Labels};

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
    /// Replicas holding no GPU already on it (of any deployment).
    pub gpuless: u32,
    /// Its labels.
    pub labels: Labels,
}

/// What one replica needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need<'a> {
    /// GPUs, all on one node.
    pub gpus: u32,
    /// Memory each of them must have.
    pub memory_per_gpu: u64,
    /// Bytes of the model's files (disk, unless the node holds them).
    pub model_bytes: u64,
    /// Fill the fullest node (binpack) or the emptiest (spread).
    pub spread: bool,
    /// Labels the node must hold, every pair.
    pub selector: &'a Labels,
    /// The nodes it may use; empty: any.
    pub nodes: &'a [String],
}

/// The bonus of a node that already holds the files: below one GPU's worth
/// of fill (10), so it breaks ties and never outweighs binpack or spread.
const FILES_HELD_BONUS: i64 = 5;

/// Replicas without GPUs one node runs at most. GPUs cap what a node takes
/// of replicas that need them; nothing else would cap those that need none,
/// so one deployment of 20 replicas put 20 engine processes, each with its
/// own memory and threads, on one node. Eight leaves a small node room for
/// the worker itself; more such replicas go to other nodes or wait.
pub const MAX_GPULESS_REPLICAS_PER_NODE: u32 = 8;

/// The chosen node and GPU indices, or why none (each node's reason).
pub fn place(nodes: &[NodeView], need: Need) -> Result<(String, Vec<u32>), String> {
    let mut best: Option<(i64, String, Vec<u32>)> = None;
    let mut reasons = Vec::new();
    for node in nodes {
        let free = match suitable(node, need) {
            Ok(free) => free,
            Err(why) => {
                reasons.push(format!("{}: {why}", node.id));
                continue;
            }
        };
        let chosen: Vec<u32> = free.iter().take(need.gpus as usize).copied().collect();
        // Binpack: the fewer GPUs left free, the better; spread: the more,
        // and the fewer replicas of the same deployment. Files already there win ties.
        let left = (free.len() as u32 - need.gpus) as i64;
        let fill = if need.spread {
            left * 10 - i64::from(node.siblings) * 100
        } else {
            -left * 10
        };
        let score = fill
            + if node.holds_files {
                FILES_HELD_BONUS
            } else {
                0
            };
        if best
            .as_ref()
            .is_none_or(|(s, id, _)| score > *s || (score == *s && node.id < *id))
        {
            best = Some((score, node.id.clone(), chosen));
        }
    }
    best.map(|(_, id, gpus)| (id, gpus))
        .ok_or_else(|| summarize(&reasons))
}

/// Every suitable free GPU of `node` for one replica (it takes the first
/// `need.gpus` of them), or why the node cannot hold the replica. The one
/// filter [`place`] and the placement preview share.
pub fn suitable(node: &NodeView, need: Need) -> Result<Vec<u32>, String> {
    if !node.schedulable {
        return Err("not schedulable".into());
    }
    if !need.nodes.is_empty() && !need.nodes.contains(&node.id) {
        return Err("not among the deployment's nodes".into());
    }
    let missing = labels::missing(need.selector, &node.labels);
    if !missing.is_empty() {
        let pairs: Vec<String> = missing.iter().map(|(k, v)| format!("{k}={v}")).collect();
        return Err(format!("labels lack {}", pairs.join(", ")));
    }
    if !node.holds_files
        && node
            .disk_available_bytes
            .is_some_and(|free| free < need.model_bytes)
    {
        return Err("not enough disk for the files".into());
    }
    if need.gpus == 0 && node.gpuless >= MAX_GPULESS_REPLICAS_PER_NODE {
        return Err(format!(
            "already runs {} replicas without GPUs, at most {MAX_GPULESS_REPLICAS_PER_NODE}",
            node.gpuless
        ));
    }
    let free: Vec<u32> = node
        .gpus
        .iter()
        .filter(|g| !node.used.contains(&g.index) && g.memory_total_bytes >= need.memory_per_gpu)
        .map(|g| g.index)
        .collect();
    if (free.len() as u32) < need.gpus {
        return Err(format!(
            "{} suitable free GPUs, {} needed",
            free.len(),
            need.gpus
        ));
    }
    Ok(free)
}

/// The most node reasons a deployment's `pending_reason` lists.
const MAX_REASONS: usize = 8;

/// Each node's reason, the first [`MAX_REASONS`] of them on a large cluster.
fn summarize(reasons: &[String]) -> String {
    match reasons.len() {
        0 => "no nodes".into(),
        n if n <= MAX_REASONS => reasons.join("; "),
        n => format!(
            "{}; and {} more nodes",
            reasons[..MAX_REASONS].join("; "),
            n - MAX_REASONS
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_large_cluster_lists_a_few_reasons_and_counts_the_rest() {
        let reasons: Vec<String> = (0..20).map(|i| format!("n{i}: too few GPUs")).collect();
        let summary = super::summarize(&reasons);
        assert!(summary.starts_with("n0: too few GPUs; n1:"), "{summary}");
        assert!(summary.ends_with("; and 12 more nodes"), "{summary}");
        assert!(!summary.contains("n8:"), "{summary}");
        assert_eq!(
            super::summarize(&reasons[..2]),
            "n0: too few GPUs; n1: too few GPUs"
        );
        assert_eq!(super::summarize(&[]), "no nodes");
    }

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
            gpuless: 0,
            labels: Labels::new(),
        }
    }

    const NO_SELECTOR: &Labels = &Labels::new();

    const ONE: Need = Need {
        gpus: 1,
        memory_per_gpu: 40 << 30,
        model_bytes: 1 << 30,
        spread: false,
        selector: NO_SELECTOR,
        nodes: &[],
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
    fn replicas_without_gpus_are_capped_per_node() {
        let none = Need { gpus: 0, ..ONE };
        let mut full = node("a", 0, &[]);
        full.gpuless = MAX_GPULESS_REPLICAS_PER_NODE;
        let why = place(std::slice::from_ref(&full), none).unwrap_err();
        assert!(why.contains("without GPUs, at most 8"), "{why}");
        assert_eq!(
            place(&[full.clone(), node("b", 0, &[])], none).unwrap().0,
            "b"
        );
        // A replica that needs a GPU is not held back by the cap.
        full.gpus = node("a", 1, &[]).gpus;
        assert_eq!(place(&[full], ONE).unwrap().0, "a");
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

    #[test]
    fn files_held_win_over_the_id_order_but_not_over_binpack() {
        // Equal nodes go to the smaller id; holding the files beats that.
        let mut warm = node("z-warm", 2, &[]);
        warm.holds_files = true;
        assert_eq!(
            place(&[node("a-cold", 2, &[]), warm.clone()], ONE)
                .unwrap()
                .0,
            "z-warm"
        );
        assert_eq!(
            place(&[node("a-cold", 2, &[]), node("z-cold", 2, &[])], ONE)
                .unwrap()
                .0,
            "a-cold"
        );
        // A fuller node still wins a binpack: the bonus only breaks ties.
        let fuller = node("b-full", 2, &[0]);
        assert_eq!(place(&[warm.clone(), fuller], ONE).unwrap().0, "b-full");
        // Spread likewise keeps preferring the emptier node.
        let spread = Need {
            spread: true,
            ..ONE
        };
        let mut busy_warm = node("c-warm", 4, &[0, 1]);
        busy_warm.holds_files = true;
        assert_eq!(
            place(&[busy_warm, node("d-cold", 4, &[])], spread)
                .unwrap()
                .0,
            "d-cold"
        );
    }

    #[test]
    fn a_selector_keeps_replicas_to_nodes_with_every_pair() {
        let labelled = |id: &str, pairs: &[(&str, &str)]| {
            let mut n = node(id, 2, &[]);
            n.labels = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            n
        };
        let selector: Labels = [
            ("gpu".to_string(), "h100".to_string()),
            ("zone".to_string(), "b".to_string()),
        ]
        .into_iter()
        .collect();
        let need = Need {
            selector: &selector,
            nodes: &[],
            ..ONE
        };
        let nodes = [
            labelled("a", &[("gpu", "h100"), ("zone", "a")]),
            labelled("b", &[("gpu", "h100"), ("zone", "b"), ("rack", "7")]),
            labelled("c", &[]),
        ];
        // "a" and "c" would win on id order; only "b" holds every pair.
        assert_eq!(place(&nodes, need).unwrap(), ("b".into(), vec![0]));
        let why = place(&[nodes[0].clone(), nodes[2].clone()], need).unwrap_err();
        assert!(why.contains("a: labels lack zone=b"), "{why}");
        assert!(why.contains("c: labels lack gpu=h100, zone=b"), "{why}");
        // No selector: any node.
        assert_eq!(place(&nodes, ONE).unwrap().0, "a");
    }
}
