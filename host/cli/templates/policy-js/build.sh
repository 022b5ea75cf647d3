#!/usr/bin/env bash
# Builds {{name}}.wasm (a WebAssembly component) here with jco's QuickJS
# backend, then runs the cases against it.
#
# `--backend-qjs-disable-async` makes the exports plain synchronous calls;
# without it they use the component model's async ABI, which Switchyard's
# host does not enable, and loading the component fails.
#
# Usage: ./build.sh            build, then `switchyard policy test --cases`
#        ./build.sh --no-test  build only
#
# Needs jco (`npm install @bytecodealliance/jco@1.35.0`) on PATH (or $JCO)
# and, for the cases, `switchyard` on PATH (or $SWITCHYARD).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
"${JCO:-jco}" componentize policy.js \
    --wit wit --world-name switchyard:policy/admission-policy@0.1.0 \
    --backend qjs --backend-qjs-disable-async -o {{name}}.wasm >/dev/null
echo "built {{name}}.wasm ($(stat -c %s {{name}}.wasm) bytes)"
if [[ "${1:-}" != "--no-test" ]]; then
    "${SWITCHYARD:-switchyard}" policy test {{name}}.wasm --cases cases.json
fi
