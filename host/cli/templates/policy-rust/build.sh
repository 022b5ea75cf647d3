#!/usr/bin/env bash
# Builds {{name}}.wasm (a WebAssembly component) here, then runs the
# native tests and the cases against it.
#
# Usage: ./build.sh            build, `cargo test`, `switchyard policy test --cases`
#        ./build.sh --no-test  build only
#
# Needs the wasm32-wasip2 target (`rustup target add wasm32-wasip2`) and, for
# the cases, the `switchyard` binary on PATH (or $SWITCHYARD).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
TARGET="${CARGO_TARGET_DIR:-target}"
cargo build --release --target wasm32-wasip2
cp "$TARGET/wasm32-wasip2/release/{{crate_name}}.wasm" {{name}}.wasm
echo "built {{name}}.wasm ($(stat -c %s {{name}}.wasm) bytes)"
if [[ "${1:-}" != "--no-test" ]]; then
    cargo test
    "${SWITCHYARD:-switchyard}" policy test {{name}}.wasm --cases cases.json
fi
