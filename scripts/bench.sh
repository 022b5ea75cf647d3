#!/usr/bin/env bash
# Builds the guests and the release binaries, then prints the platform's
# benchmark table (see docs/benchmarks.md for the recorded figures).
# Arguments select sections: latency, activation, swap, idle-memory, nats,
# pgbus, tunnel, lanes, routing (both carrier sets), proxy (the CPU per
# request of the frontend and the worker beside nginx and beside a bare
# one-hop proxy of our HTTP libraries, with wrk), staging,
# switch (the live carrier switch under chat load), federation (a remote
# chat completion through the link between two clusters beside the owner
# directly), copy (a federated model copy between two clusters beside local
# staging), batch (an OpenAI batch's lines through the work queue beside the
# same requests one by one), languages (the model allowlist from Rust,
# Python and JavaScript: size, load, call), metering (the CPU per chat
# request with nothing on, metering, and metering with the rate-limit policy
# and OTLP traces), accounting (the same parts timed in-process).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
ensure_postgres
ensure_nats_server
ensure_bench_tools
ensure_wasm_target
use_target_dir
build_guests
build_policy_examples
say "building switchyard and switchyard-bench (release)"
cargo build --release -q -p switchyard -p switchyard-bench
"$CARGO_TARGET_DIR/release/switchyard-bench" "$@"
