#!/usr/bin/env bash
# Builds {{name}}.wasm (a WebAssembly component) here with componentize-py,
# then runs the cases against it.
#
# Usage: ./build.sh            build, then `switchyard policy test --cases`
#        ./build.sh --no-test  build only
#
# Needs componentize-py (`pip install componentize-py==0.25.1`) on PATH (or
# $COMPONENTIZE_PY) and, for the cases, `switchyard` on PATH (or $SWITCHYARD).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
"${COMPONENTIZE_PY:-componentize-py}" \
    -d wit -w switchyard:policy/admission-policy@0.1.0 \
    componentize -p . app -o {{name}}.wasm >/dev/null
echo "built {{name}}.wasm ($(stat -c %s {{name}}.wasm) bytes)"
if [[ "${1:-}" != "--no-test" ]]; then
    "${SWITCHYARD:-switchyard}" policy test {{name}}.wasm --cases cases.json
fi
