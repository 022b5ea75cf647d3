#!/usr/bin/env bash
# The main job: builds what it needs and runs `switchyard up`, a whole
# cluster on this machine: the embedded PostgreSQL (under ./switchyard-data),
# a frontend with the `tunnel` carrier set, a local worker with a declared
# GPU, and the reference engine serving a demo model. It prints a working
# `curl` and the OpenAI client snippet. Ctrl-C stops everything.
#
# Environment: SWITCHYARD_LISTEN (default 127.0.0.1:8080), SWITCHYARD_DATA_DIR
# (default ./switchyard-data), CARGO_TARGET_DIR, SWITCHYARD_PLUGINS_DIR (a
# folder of carrier components to use instead of the built-in ones).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

ensure_postgres
ensure_wasm_target
# Only the target folder: SWITCHYARD_PLUGINS_DIR would make `up` read the
# components from a folder instead of the ones built in.
export CARGO_TARGET_DIR
CARGO_TARGET_DIR=$(default_target_dir)
listen="${SWITCHYARD_LISTEN:-127.0.0.1:8080}"
data_dir="${SWITCHYARD_DATA_DIR:-$PWD/switchyard-data}"

# The binary carries the carrier components and the shipped policies: its
# build compiles them for wasm32-wasip2 (host/artifacts), once.
say "building switchyard"
cargo build -q -p switchyard
bin="$CARGO_TARGET_DIR/debug/switchyard"

say "switchyard up (data in $data_dir)"
exec "$bin" up --listen "$listen" --data-dir "$data_dir"
