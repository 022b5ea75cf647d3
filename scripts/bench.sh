#!/usr/bin/env bash
# Builds the guests and the release binaries, then prints the platform's
# benchmark table (see docs/benchmarks.md for the recorded figures).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
ensure_postgres
ensure_nats_server
ensure_wasm_target
export CARGO_TARGET_DIR
CARGO_TARGET_DIR=$(default_target_dir)
export SWITCHYARD_PLUGINS_DIR="$CARGO_TARGET_DIR/plugins"
say "building the guest components"
scripts/build-guests.sh >/dev/null
say "building switchyard and switchyard-bench (release)"
cargo build --release -q -p switchyard -p switchyard-bench
"$CARGO_TARGET_DIR/release/switchyard-bench"
