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

pg_root=$(mktemp -d /tmp/switchyard-fuzz-pg.XXXXXX)
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
"${as_pg[@]}" "$bin/initdb" -D "$pg_root/data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
"${as_pg[@]}" "$bin/pg_ctl" -D "$pg_root/data" -l "$pg_root/server.log" -w -o \
    "-c listen_addresses='' -c unix_socket_directories='$pg_root' -c fsync=off" start >/dev/null
export SWITCHYARD_TEST_DATABASE_URL="host=$pg_root port=5432 user=postgres dbname=postgres"
export SWITCHYARD_API_FUZZ_SECONDS=$seconds
export SWITCHYARD_API_FUZZ_SEED=${SWITCHYARD_API_FUZZ_SEED:-$RANDOM$RANDOM}
say "fuzzing the API for ${seconds}s per key (seed $SWITCHYARD_API_FUZZ_SEED)"
cargo test -p switchyard-tests --test platform api_fuzz -- --nocapture
