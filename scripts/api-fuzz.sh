#!/usr/bin/env bash
# The API fuzzer, long: Schemathesis against a running replica's OpenAPI
# document, with the admin token and with a narrow key, for SECONDS per key
# (default 600) and a fresh seed each run. The test command runs the same
# test for 45 s per key with a fixed seed.
#   scripts/api-fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

seconds=${1:-600}
ensure_postgres
use_target_dir
ensure_python_clients
build_guests

start_private_postgres
trap stop_private_postgres EXIT
export SWITCHYARD_API_FUZZ_SECONDS=$seconds
export SWITCHYARD_API_FUZZ_SEED=${SWITCHYARD_API_FUZZ_SEED:-$RANDOM$RANDOM}
say "fuzzing the API for ${seconds}s per key (seed $SWITCHYARD_API_FUZZ_SEED)"
cargo test -p switchyard-tests --test platform api_fuzz -- --nocapture
