//! `switchyard-bench`: prints a table of the platform's figures.
//!
//! Run it with `scripts/bench.sh` (release build, guests built first). It
//! measures, in one run:
//! 1. evaluation latency (p50/p99) of one policy and of a chain of three
//!    through the host, beside the same logic compiled natively;
//! 2. activation of a new generation with a warm compile cache;
//! 3. a swap every 5 ms while 8 threads call continuously (failed calls);
//! 4. resident memory of an idle `switchyard serve` with the three policies bound;
//! 5. the nats carrier beside async-nats on one nats-server;
//! 6. the pgbus carrier: a burst of large broadcasts, and small messages beside bare `pg_notify`;
//! 7. one tunnel stream's throughput beside bare TCP, and (`lanes`) a small
//!    call's latency behind a bulk transfer on a shaped link;
//! 8. (`routing`) OpenAI requests through the frontend beside straight to the engine,
//!    and (`proxy`) the CPU per request of each process on the path beside nginx;
//! 9. (`staging`) a verified model copy to a worker beside `sha256sum` + `cp`;
//! 10. (`switch`) the live carrier switch under chat load: request → commit
//!     and commit → settled per direction, failures, losses and repeats;
//! 11. (`federation`) a remote chat completion through the link between two
//!     clusters beside the same request on the owner directly;
//! 12. (`copy`) a federated model copy between two clusters beside local staging;
//! 13. (`batch`) an OpenAI batch's lines per second through the work queue
//!     beside the same requests one by one at the same concurrency.
//! 14. (`languages`) the model allowlist from Rust, Python and JavaScript:
//!     size, cold and warm load, and a call's time.
//! 15. (`metering`) the CPU per chat request of the cluster's processes with
//!     nothing on, usage metering on, and metering with the rate-limit policy
//!     and OTLP traces.
//! 16. (`accounting`) the same three parts, each timed in this process: the
//!     usage counters, the rate-limit policy's call, a request's spans.
//!
//! `anchors` runs the sections that measure the performance issue's rows
//! (`nats`, `pgbus`, `proxy`, `tunnel`); whatever ran, those rows close the
//! output as one table beside their anchors, all from this run.

mod accounting;
mod activation;
mod anchors;
mod batch;
mod copy;
mod cpu;
mod federation;
mod fixtures;
mod floor_proxy;
mod idle_memory;
mod lanes;
mod languages;
mod latency;
mod metering;
mod nats;
mod pgbus;
mod proxy;
mod routing;
mod shaper;
mod staging;
mod stats;
mod swap;
mod switch;
mod tunnel;

/// Every section, by the name `switchyard-bench <name>...` selects it with.
const SECTIONS: [(&str, fn()); 18] = [
    ("latency", latency::run),
    ("activation", activation::run),
    ("swap", swap::run),
    ("idle-memory", idle_memory::run),
    ("nats", nats::run),
    ("pgbus", pgbus::run),
    ("tunnel", tunnel::run),
    ("lanes", lanes::run),
    ("routing", routing::run),
    ("metering", metering::run),
    ("accounting", accounting::run),
    ("proxy", proxy::run),
    ("staging", staging::run),
    ("switch", switch::run),
    ("federation", federation::run),
    ("copy", copy::run),
    ("batch", batch::run),
    ("languages", languages::run),
];

fn main() {
    switchyard_carrier::allocator::keep_freed_buffers();
    let mut wanted: Vec<String> = std::env::args().skip(1).collect();
    if let [argument, listen, upstream] = &wanted[..]
        && argument == floor_proxy::ARGUMENT
    {
        return floor_proxy::serve(listen, upstream);
    }
    if wanted.iter().any(|w| w == "anchors") {
        wanted.retain(|w| w != "anchors");
        wanted.extend(anchors::SECTIONS.map(String::from));
    }
    if let Some(unknown) = wanted
        .iter()
        .find(|w| !SECTIONS.iter().any(|(name, _)| name == w))
    {
        let names: Vec<&str> = SECTIONS.iter().map(|(name, _)| *name).collect();
        eprintln!(
            "unknown section '{unknown}'; sections: {}, anchors",
            names.join(", ")
        );
        std::process::exit(2);
    }
    let plugins = fixtures::plugins_dir();
    println!("switchyard-bench (plugins from {})", plugins.display());
    println!();
    for (name, run) in SECTIONS {
        if wanted.is_empty() || wanted.iter().any(|w| w == name) {
            run();
        }
    }
    anchors::print();
}
