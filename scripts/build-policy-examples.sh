#!/usr/bin/env bash
# Builds the policy examples written in Python and JavaScript
# (examples/model-allowlist-python, examples/model-allowlist-js) into the
# plugins folder, beside the Rust guests, installing componentize-py (PyPI)
# and jco (npm) first when they are missing. Prints each component's size
# and build time.
#
# Usage: scripts/build-policy-examples.sh
#
# Environment:
#   CARGO_TARGET_DIR        where the tools are installed (default: ./target)
#   SWITCHYARD_PLUGINS_DIR  where the components go (default: $CARGO_TARGET_DIR/plugins)
set -euo pipefail

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 0
fi

cd "$(dirname "$0")/.."
source scripts/common.sh
use_target_dir
ensure_policy_toolchains
mkdir -p "$SWITCHYARD_PLUGINS_DIR"

for lang in python js; do
    started=$(date +%s.%N)
    "examples/model-allowlist-$lang/build.sh" "$SWITCHYARD_PLUGINS_DIR/model-allowlist-$lang.wasm"
    say "model-allowlist-$lang built in $(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
done
