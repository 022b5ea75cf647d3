#!/usr/bin/env bash
# Builds this policy into a component with componentize-py (from PyPI:
# `pip install componentize-py==0.25.1`), against the repo's WIT and the
# Python SDK helper in sdk/python.
#
# Usage: build.sh [OUT.wasm]   (default: target/model-allowlist-python.wasm here)
#
# Environment:
#   COMPONENTIZE_PY  the componentize-py command (default: componentize-py on PATH)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$HERE/../.."
OUT="${1:-$HERE/target/model-allowlist-python.wasm}"
mkdir -p "$(dirname "$OUT")"
"${COMPONENTIZE_PY:-componentize-py}" \
    -d "$ROOT/wit" -w switchyard:policy/admission-policy@0.1.0 \
    componentize -p "$ROOT/sdk/python" -p "$HERE" app -o "$OUT" >/dev/null
echo "built $OUT ($(stat -c %s "$OUT") bytes)"
