#!/usr/bin/env bash
# Builds this policy into a component with jco (from npm:
# `npm install @bytecodealliance/jco@1.35.0`), against the repo's WIT and the
# JavaScript SDK helper in sdk/js, which the build copies beside policy.js
# (jco resolves imports only under the source's own folder).
#
# jco's QuickJS backend (`--backend qjs`) makes a 1.7 MB component;
# `--backend-qjs-disable-async` makes its exports plain synchronous lifts:
# without it they use the component model's async ABI (`task.cancel`), which
# the host's wasmtime is built without (see sdk/js/README.md).
#
# Usage: build.sh [OUT.wasm]   (default: target/model-allowlist-js.wasm here)
#
# Environment:
#   JCO  the jco command (default: jco on PATH)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$HERE/../.."
OUT="${1:-$HERE/target/model-allowlist-js.wasm}"
mkdir -p "$(dirname "$OUT")"
OUT="$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")"
STAGE="$(mktemp -d /tmp/switchyard-js-policy.XXXXXX)"
trap 'rm -rf "$STAGE"' EXIT
cp "$HERE/policy.js" "$ROOT/sdk/js/switchyard-policy.js" "$STAGE/"
"${JCO:-jco}" componentize "$STAGE/policy.js" \
    --wit "$ROOT/wit" --world-name switchyard:policy/admission-policy@0.1.0 \
    --backend qjs --backend-qjs-disable-async -o "$OUT" >/dev/null
echo "built $OUT ($(stat -c %s "$OUT") bytes)"
