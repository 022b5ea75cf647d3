#!/usr/bin/env bash
# Runs every test. Installs what is missing (PostgreSQL, nats-server, the
# wasm32-wasip2 target, a Python venv with the openai, gguf, schemathesis and
# selenium packages, Debian's chromium and chromium-driver, cargo-fuzz, llama.cpp's llama-server built once from source,
# componentize-py and jco for the Python and JavaScript policies),
# builds the guest components, the policy examples and the binary, starts two private PostgreSQLs
# for the suites (one on a Unix socket, one that accepts only TLS; stopped on exit), then: rustfmt,
# clippy, every test of the workspace (unit, SDK and policy cases, end-to-end suites, Schemathesis
# against the API), the platform suite again against the TLS-only PostgreSQL (sslmode=verify-full
# with a private CA), and every fuzz target for a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

ensure_postgres
ensure_nats_server
ensure_wasm_target
use_target_dir
ensure_python_clients
ensure_console_browser
ensure_llama_server
build_guests
build_policy_examples

say "checking formatting"
cargo fmt --all --check
(cd fuzz && cargo fmt --check) # a workspace of its own

say "the tree's shape against its ratchet (scripts/structure.sh)"
scripts/structure.sh

say "building the host"
cargo build -p switchyard

start_private_postgres
trap stop_private_postgres EXIT

say "clippy"
cargo clippy --workspace --all-targets -- -D warnings

say "running the tests"
# The benchmark is checked by clippy above and run by scripts/bench.sh.
# The API fuzzer (tests/platform/api_fuzz.rs) runs Schemathesis 45 s per key.
cargo test --workspace --exclude switchyard-bench

say "the platform suite again, against the PostgreSQL that accepts only TLS (verify-full, a private CA)"
SWITCHYARD_TEST_DATABASE_URL="$SWITCHYARD_TEST_TLS_DATABASE_URL" cargo test --workspace --exclude switchyard-bench --test platform

say "fuzzing every network parser briefly (scripts/fuzz.sh runs them long)"
run_fuzzers_briefly
say "all tests passed"
