//! Model staging: a verified copy of a model file from the frontend's
//! library into a worker's placement cache (`files.status`, then ranges of
//! 64 MiB over the bulk lane of a real loopback websocket, written, synced
//! and verified by SHA-256 before use), beside `sha256sum` plus `cp` of the
//! same file on the same disk.

use std::sync::Arc;
use std::time::Instant;

use switchyard_carrier::control::StreamControl;
use switchyard_carrier::stream_seam::{Lane as SeamLane, StreamsSeam};
use switchyard_carrier::tunnel::TunnelRegistry;
use switchyard_carrier::tunnel::{Lane, loopback};
use switchyard_library::Library;
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_scheduler::staging::stage;
use switchyard_store::models::{ModelFile, ModelRevision};
use switchyard_worker::engines::EngineBinaries;
use switchyard_worker::node::Node;
use switchyard_worker::placement::Placement;

use crate::stats::header;
use crate::tunnel::spec;

/// The file's size (the `copy` section copies as much).
pub const SIZE: usize = 256 * 1024 * 1024;

pub fn run() {
    let (baseline, staged) = measure();
    header(
        "Model staging: a 256 MiB file, verified copy to a worker beside sha256sum + cp on the same disk",
        &["path", "MB/s", "ratio"],
    );
    println!("| sha256sum, then cp | {baseline:.0} | 1.00 |");
    println!(
        "| library to placement cache (bulk lane, 64 MiB ranges, fsync, verify) | {staged:.0} | {:.2} |",
        staged / baseline
    );
    println!();
}

/// `len` pseudo-random bytes (not compressible, not all zeros).
pub fn pseudo_random(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    (0..len / 8)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()
        })
        .collect()
}

/// `sha256sum` plus `cp`, and the verified staging, of one file: MB/s each.
pub fn measure() -> (f64, f64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(async {
        let dir = tempfile::tempdir_in(std::env::temp_dir()).expect("temp dir");
        let bytes = pseudo_random(SIZE);
        let source = dir.path().join("model.bin");
        std::fs::write(&source, &bytes).expect("write the model");
        drop(bytes);

        // Baseline: hash, then copy, with the system's tools.
        let started = Instant::now();
        let hashed = std::process::Command::new("sha256sum")
            .arg(&source)
            .output()
            .expect("sha256sum");
        let digest = String::from_utf8_lossy(&hashed.stdout)[..64].to_string();
        let copied = std::process::Command::new("cp")
            .arg(&source)
            .arg(dir.path().join("copy.bin"))
            .status()
            .expect("cp");
        assert!(copied.success());
        let baseline = rate(started.elapsed());
        let _ = std::fs::remove_file(dir.path().join("copy.bin"));

        // The library holds the file under its digest.
        let library = Library::open(&dir.path().join("library")).expect("library");
        std::fs::rename(&source, library.blob_path(&digest)).expect("into the library");

        // A worker on the other end of a loopback tunnel, both lanes.
        let plugins = Runtime::new(RuntimeConfig::for_carriers(None)).expect("runtime");
        let node = Node::new(
            Placement::open(&dir.path().join("worker"), 0).expect("placement"),
            EngineBinaries::default(),
            Default::default(),
        );
        let registry = Arc::new(TunnelRegistry::default());
        for (lane, seam_lane) in [
            (Lane::Inference, SeamLane::Inference),
            (Lane::Bulk, SeamLane::Bulk),
        ] {
            let (listener, address) = loopback::listen().await.expect("bind");
            let (frontend, worker) =
                loopback::pair(&plugins, &spec(), listener, &address, lane, node.acceptor())
                    .await
                    .expect("a session pair");
            std::mem::forget(worker);
            registry.insert("bench", seam_lane, frontend);
        }
        let streams: Arc<dyn StreamsSeam> = registry.clone();
        let control = StreamControl::new(streams.clone());
        let revision = ModelRevision {
            id: "bench".into(),
            revision: "r1".into(),
            licence: None,
            files: vec![ModelFile {
                path: "model.bin".into(),
                size: SIZE as i64,
                sha256: digest.clone(),
            }],
            imported_by: String::new(),
            imported_at: String::new(),
        };
        let started = Instant::now();
        stage(&control, &*streams, &library, "bench", &revision, |_, _| {})
            .await
            .expect("staged");
        let staged = rate(started.elapsed());
        assert!(
            node.placement().path(&digest).is_file(),
            "the verified copy is in place"
        );
        (baseline, staged)
    })
}

fn rate(elapsed: std::time::Duration) -> f64 {
    SIZE as f64 / elapsed.as_secs_f64() / 1e6
}
