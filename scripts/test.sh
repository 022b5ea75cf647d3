#!/usr/bin/env bash
# Runs every test. Installs what is missing (PostgreSQL, nats-server, the
# wasm32-wasip2 target, a Python venv with the openai, gguf and schemathesis
# packages, cargo-fuzz, llama.cpp's llama-server built once from source),
# builds the guest components and the binary, starts a private PostgreSQL
# for the suites (stopped on exit), then: rustfmt, clippy, every test of the workspace (unit,
# SDK and policy cases, end-to-end suites, Schemathesis against the API), and
# every fuzz target for a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

ensure_postgres
ensure_nats_server
ensure_wasm_target
use_target_dir
ensure_python_clients
ensure_llama_server
build_guests

say "checking formatting"
cargo fmt --all --check
(cd fuzz && cargo fmt --check) # a workspace of its own

say "building the host"
cargo build -p switchyard

# A private PostgreSQL for the suites, on a Unix socket only.
pg_root=$(mktemp -d /tmp/switchyard-test-pg.XXXXXX)
chmod 711 "$pg_root"
as_pg=()
if [[ $(id -u) -eq 0 ]]; then
    chown postgres: "$pg_root"
    as_pg=(runuser -u postgres --)
fi
bin=$(pg_bin_dir)
stop_pg() {
    "${as_pg[@]}" "$bin/pg_ctl" -D "$pg_root/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$pg_root"
}
trap stop_pg EXIT
say "starting a private PostgreSQL in $pg_root"
"${as_pg[@]}" "$bin/initdb" -D "$pg_root/data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
"${as_pg[@]}" "$bin/pg_ctl" -D "$pg_root/data" -l "$pg_root/server.log" -w -o \
    "-c listen_addresses='' -c unix_socket_directories='$pg_root' -c max_connections=300 -c fsync=off" start >/dev/null
export SWITCHYARD_TEST_DATABASE_URL="host=$pg_root port=5432 user=postgres dbname=postgres"

say "clippy"
cargo clippy --workspace --all-targets -- -D warnings

say "running the tests"
# The benchmark is checked by clippy above and run by scripts/bench.sh.
# The API fuzzer (tests/platform/api_fuzz.rs) runs Schemathesis 45 s per key.
cargo test --workspace --exclude switchyard-bench

say "fuzzing every network parser briefly (scripts/fuzz.sh runs them long)"
run_fuzzers_briefly
say "all tests passed"
