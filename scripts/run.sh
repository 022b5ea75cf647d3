#!/usr/bin/env bash
# The main job: builds what it needs and starts a Switchyard server on the
# embedded default (a private PostgreSQL under ./switchyard-data) with the
# `tunnel` carrier set, and a local worker connected to it. On the first
# start it pushes the three shipped policies, binds them (inference:
# model-allowlist then max-tokens; deploy: gpu-memory-guard), registers the
# worker, and prints the admin token and example requests. Ctrl-C stops
# everything.
#
# Environment: SWITCHYARD_LISTEN (default 127.0.0.1:8080), SWITCHYARD_DATA_DIR
# (default ./switchyard-data), CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

ensure_postgres
ensure_wasm_target
use_target_dir
listen="${SWITCHYARD_LISTEN:-127.0.0.1:8080}"
data_dir="${SWITCHYARD_DATA_DIR:-$PWD/switchyard-data}"
server="http://$listen"

build_guests
say "building switchyard"
cargo build -q -p switchyard
bin="$CARGO_TARGET_DIR/debug/switchyard"

first_start=false
registration_token=
if [[ ! -f "$data_dir/postgres/PG_VERSION" ]]; then
    first_start=true
    export SWITCHYARD_ADMIN_TOKEN="sy_$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
fi

say "starting switchyard serve on $server (data in $data_dir)"
# --auto-approve: the local worker needs no admin approval.
"$bin" serve --listen "$listen" --data-dir "$data_dir" --auto-approve --carrier-plugins "$SWITCHYARD_PLUGINS_DIR" &
serve_pid=$!
worker_pid=
trap 'kill -TERM $worker_pid $serve_pid 2>/dev/null; wait $worker_pid $serve_pid' INT TERM
until curl -sf "$server/readyz" >/dev/null; do
    kill -0 $serve_pid 2>/dev/null || { echo "switchyard serve exited" >&2; exit 1; }
    sleep 0.2
done

if $first_start; then
    export SWITCHYARD_TOKEN="$SWITCHYARD_ADMIN_TOKEN" SWITCHYARD_SERVER="$server"
    for policy in model-allowlist max-tokens gpu-memory-guard; do
        say "pushing $policy"
        "$bin" plugin push "$SWITCHYARD_PLUGINS_DIR/$policy.wasm" --name "$policy" --version 0.1.0 >/dev/null
    done
    say "binding inference: model-allowlist, max-tokens"
    "$bin" admission set inference --policy model-allowlist@0.1.0 --policy max-tokens@0.1.0 \
        --settings policies/model-allowlist/test_data/settings.json \
        --settings policies/max-tokens/test_data/settings.json >/dev/null
    say "binding deploy: gpu-memory-guard"
    "$bin" admission set deploy --policy gpu-memory-guard@0.1.0 \
        --settings policies/gpu-memory-guard/test_data/settings.json >/dev/null
    say "creating a registration token for the local worker"
    registration_token="$("$bin" node token --name local-worker | sed -n 's/.*"value": *"\([^"]*\)".*/\1/p')"
fi

worker_dir="$data_dir/worker"
say "starting a local worker (identity in $worker_dir)"
"$bin" worker --frontend "$server" --data-dir "$worker_dir" --name "$(hostname)-local" \
    --carrier-plugins "$SWITCHYARD_PLUGINS_DIR" ${registration_token:+--registration-token "$registration_token"} &
worker_pid=$!
until [[ -f "$worker_dir/node.json" ]]; do
    kill -0 $worker_pid 2>/dev/null || { echo "switchyard worker exited" >&2; exit 1; }
    sleep 0.2
done
node_id="$(sed -n 's/.*"node_id": *"\([^"]*\)".*/\1/p' "$worker_dir/node.json")"

if $first_start; then
    token="$SWITCHYARD_ADMIN_TOKEN"
    cat <<EOT

Switchyard is running at $server

Admin token (shown once; store it now):
    $token

Try the inference chain (this request asks for too many tokens and is denied):
    curl -s $server/api/admission/inference/evaluate \\
      -H "Authorization: Bearer $token" -H 'content-type: application/json' \\
      -d '{"caller":{"key_id":"k1","project":"research","scopes":["inference"]},"model":"llama-3-8b","endpoint":"/v1/chat/completions","prompt_tokens":12,"max_tokens":8192,"stream":false}'

A control call to the local worker over the tunnel carrier:
    curl -s -X POST $server/api/cluster/nodes/$node_id/control/ping -H "Authorization: Bearer $token"

Ctrl-C stops the worker, the server and its PostgreSQL; the next start reuses them.
EOT
else
    cat <<EOT

Switchyard is running at $server (state reused from $data_dir).
Use the admin token printed at the first start:
    curl -s $server/api/admission/inference -H "Authorization: Bearer \$SWITCHYARD_TOKEN"
    curl -s -X POST $server/api/cluster/nodes/$node_id/control/ping -H "Authorization: Bearer \$SWITCHYARD_TOKEN"

Ctrl-C stops the worker, the server and its PostgreSQL.
EOT
fi
wait $serve_pid
