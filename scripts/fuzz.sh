#!/usr/bin/env bash
# Fuzzes every parser that reads bytes from the network (the targets in
# fuzz/fuzz_targets, see docs/reliability.md) with libFuzzer through
# cargo-fuzz, which it installs from crates.io if missing. Builds the
# targets into $CARGO_TARGET_DIR/fuzz, then runs each, one at a time, until
# 10 million executions (FUZZ_RUNS) or SECONDS (2400 by default), whichever
# comes first, and prints its executions and exec/s. Exits non-zero if a
# target crashed, hung or ran out of memory, naming the input and how to
# replay it.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
seconds=${1:-2400}
shift || true
use_target_dir
run_fuzzers "$seconds" "$@"
