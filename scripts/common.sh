# Shared by the README's scripts: say what is happening, install what is missing.
# Sourced, not run.

say() { echo "==> $*"; }

# apt-get install, once per script, only for what is missing; sudo when not root.
apt_install() {
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    if [[ -z "${APT_UPDATED:-}" ]]; then
        say "apt-get update"
        $sudo apt-get update -qq
        APT_UPDATED=1
    fi
    say "installing $* with apt-get"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

# PostgreSQL's server binaries (initdb, pg_ctl), as Debian's postgresql package ships them.
ensure_postgres() {
    if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null; then
        return
    fi
    apt_install postgresql
}

ensure_wasm_target() {
    if ! rustup target list --installed | grep -qx wasm32-wasip2; then
        say "adding the wasm32-wasip2 target with rustup"
        rustup target add wasm32-wasip2
    fi
}

# The directory of initdb and pg_ctl: Debian's newest versioned one, else PATH.
pg_bin_dir() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [[ -n "$dir" && -x "$dir/initdb" ]]; then echo "$dir"; else dirname "$(command -v initdb)"; fi
}

# A private PostgreSQL for the suites, on a Unix socket only, in a fresh
# folder; exports SWITCHYARD_TEST_DATABASE_URL. Then a second one that
# accepts only TLS (start_tls_postgres). Pair with
# `trap stop_private_postgres EXIT`.
start_private_postgres() {
    PG_ROOT=$(mktemp -d /tmp/switchyard-test-pg.XXXXXX)
    chmod 711 "$PG_ROOT"
    AS_PG=()
    if [[ $(id -u) -eq 0 ]]; then
        chown postgres: "$PG_ROOT"
        AS_PG=(runuser -u postgres --)
    fi
    PG_BIN=$(pg_bin_dir)
    say "starting a private PostgreSQL in $PG_ROOT"
    "${AS_PG[@]}" "$PG_BIN/initdb" -D "$PG_ROOT/data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
    "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PG_ROOT/data" -l "$PG_ROOT/server.log" -w -o \
        "-c listen_addresses='' -c unix_socket_directories='$PG_ROOT' -c max_connections=300 -c fsync=off" start >/dev/null
    export SWITCHYARD_TEST_DATABASE_URL="host=$PG_ROOT port=5432 user=postgres dbname=postgres"
    start_tls_postgres
}

# The role of the TLS PostgreSQL that signs in with a client certificate
# (its CN) instead of a password.
TLS_CLIENT_ROLE=switchyard_tls_client

# A private PostgreSQL that accepts only TLS, as managed services do: on
# 127.0.0.1 at a free port, `hostssl` lines only (no `local`, no `host`),
# its certificate (localhost, 127.0.0.1) signed by a CA made here with the
# openssl CLI. Exports SWITCHYARD_TEST_TLS_DATABASE_URL (the superuser, with
# a password, sslmode=verify-full and the CA) and
# SWITCHYARD_TEST_TLS_CLIENT_URL (TLS_CLIENT_ROLE with its client
# certificate, which the server requires of that role).
start_tls_postgres() {
    command -v openssl >/dev/null || apt_install openssl
    PG_BIN=${PG_BIN:-$(pg_bin_dir)}
    AS_PG=()
    [[ $(id -u) -ne 0 ]] || AS_PG=(runuser -u postgres --)
    PG_TLS_ROOT=$(mktemp -d /tmp/switchyard-test-pg-tls.XXXXXX)
    chmod 711 "$PG_TLS_ROOT"
    local certs="$PG_TLS_ROOT/certs" data="$PG_TLS_ROOT/data" password port=""
    mkdir -p "$certs"
    password=$(openssl rand -hex 16)
    say "making a private CA and certificates in $certs"
    (
        set -e
        cd "$certs"
        local key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
        openssl req -x509 "${key[@]}" -days 3 -subj "/CN=switchyard test CA" -keyout ca.key -out ca.crt
        openssl req "${key[@]}" -subj "/CN=localhost" -keyout server.key -out server.csr
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3 \
            -extfile server.ext -out server.crt
        openssl req "${key[@]}" -subj "/CN=$TLS_CLIENT_ROLE" -keyout client.key -out client.csr
        printf 'extendedKeyUsage=clientAuth\n' >client.ext
        openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3 \
            -extfile client.ext -out client.crt
        chmod 600 server.key client.key
    ) >"$PG_TLS_ROOT/openssl.log" 2>&1 || { cat "$PG_TLS_ROOT/openssl.log"; return 1; }
    printf '%s\n' "$password" >"$PG_TLS_ROOT/password"
    chmod 600 "$PG_TLS_ROOT/password"
    if [[ $(id -u) -eq 0 ]]; then
        chown -R postgres: "$PG_TLS_ROOT"
        # The suites (this user) read the CA and present the client's certificate.
        chown root: "$certs/client.key"
    fi
    say "starting a private PostgreSQL that accepts only TLS in $PG_TLS_ROOT"
    "${AS_PG[@]}" "$PG_BIN/initdb" -D "$data" -U postgres --auth=scram-sha-256 \
        --pwfile="$PG_TLS_ROOT/password" -E UTF8 --locale=C >/dev/null || return 1
    rm -f "$PG_TLS_ROOT/password"
    # First match wins: the certificate role must present its certificate
    # (`cert` checks it against the CA and its CN against the role).
    "${AS_PG[@]}" tee "$data/pg_hba.conf" >/dev/null <<HBA
hostssl all $TLS_CLIENT_ROLE 127.0.0.1/32 cert
hostssl all all 127.0.0.1/32 scram-sha-256
HBA
    local attempt
    for attempt in 1 2 3 4 5 6 7 8; do
        port=$((20000 + RANDOM % 30000))
        if "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$data" -l "$PG_TLS_ROOT/server.log" -w -o \
            "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='' \
             -c ssl=on -c ssl_cert_file='$certs/server.crt' -c ssl_key_file='$certs/server.key' \
             -c ssl_ca_file='$certs/ca.crt' -c max_connections=300 -c fsync=off" start >/dev/null; then
            break
        fi
        port=""  # most likely taken: another port
    done
    if [[ -z "$port" ]]; then
        tail -n 20 "$PG_TLS_ROOT/server.log" >&2
        say "the TLS PostgreSQL did not start"
        return 1
    fi
    local tls="sslmode=verify-full&sslrootcert=$certs/ca.crt"
    export SWITCHYARD_TEST_TLS_DATABASE_URL="postgres://postgres:$password@localhost:$port/postgres?$tls"
    export SWITCHYARD_TEST_TLS_CLIENT_URL="postgres://$TLS_CLIENT_ROLE@localhost:$port/postgres?$tls&sslcert=$certs/client.crt&sslkey=$certs/client.key"
    PGPASSWORD=$password "$PG_BIN/psql" -qAt -v ON_ERROR_STOP=1 \
        "host=localhost port=$port user=postgres dbname=postgres sslmode=verify-full sslrootcert=$certs/ca.crt" \
        -c "CREATE ROLE $TLS_CLIENT_ROLE LOGIN" >/dev/null
}

stop_private_postgres() {
    if [[ -n "${PG_ROOT:-}" ]]; then
        "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PG_ROOT/data" -m immediate -w stop >/dev/null 2>&1 || true
        rm -rf "$PG_ROOT"
    fi
    if [[ -n "${PG_TLS_ROOT:-}" ]]; then
        "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PG_TLS_ROOT/data" -m immediate -w stop >/dev/null 2>&1 || true
        rm -rf "$PG_TLS_ROOT"
    fi
}

# A reused target folder outside the clone makes a fresh clone build fast.
default_target_dir() {
    if [[ -n "${CARGO_TARGET_DIR:-}" ]]; then echo "$CARGO_TARGET_DIR"
    elif [[ -d "$HOME/.cache/switchyard-target" ]]; then echo "$HOME/.cache/switchyard-target"
    else echo "$PWD/target"; fi
}

# A real nats-server for the carrier suites (Debian's nats-server package).
ensure_nats_server() {
    if command -v nats-server >/dev/null || [[ -x /usr/sbin/nats-server ]]; then
        return
    fi
    apt_install nats-server
}

# The bench's comparison tools (bench.sh only): Debian's nginx as the reverse
# proxy that `proxy` measures ours beside, and wrk, which drives both.
ensure_bench_tools() {
    local missing=()
    command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || missing+=(nginx)
    command -v wrk >/dev/null || missing+=(wrk)
    [[ ${#missing[@]} -eq 0 ]] || apt_install "${missing[@]}"
}

SCHEMATHESIS_VERSION=4.32.5
OTEL_PROTO_VERSION=1.29.0
# A Python with the official `openai` client (from PyPI), for the suites that
# check the API with it; a virtual environment beside the build, reused.
ensure_python_clients() {
    if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        apt_install python3 python3-venv
    fi
    local venv="$CARGO_TARGET_DIR/python-clients"
    if ! "$venv/bin/python" -c 'import openai' 2>/dev/null; then
        say "installing the openai Python client into $venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q openai
    fi
    # Schemathesis drives the API fuzzer (tests/platform/api_fuzz.rs, scripts/api-fuzz.sh).
    if ! "$venv/bin/python" -c 'import schemathesis' 2>/dev/null; then
        say "installing schemathesis $SCHEMATHESIS_VERSION into $venv"
        "$venv/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"
    fi
    # The OTLP receiver of the tracing suite (tests/clients/otlp_receiver.py)
    # decodes real OTLP/HTTP bodies with OpenTelemetry's own protobuf types.
    if ! "$venv/bin/python" -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null; then
        say "installing opentelemetry-proto $OTEL_PROTO_VERSION into $venv"
        "$venv/bin/pip" install -q "opentelemetry-proto==$OTEL_PROTO_VERSION"
    fi
    export SWITCHYARD_PYTHON="$venv/bin/python"
}

# The web console's browser suite (tests/platform/console.rs): Debian's
# chromium and its chromedriver, and selenium in the Python clients' venv.
# Needs ensure_python_clients first.
SELENIUM_VERSION=4.27.1
ensure_console_browser() {
    local missing=()
    [[ -x /usr/bin/chromium ]] || missing+=(chromium)
    [[ -x /usr/bin/chromedriver ]] || missing+=(chromium-driver)
    [[ ${#missing[@]} -eq 0 ]] || apt_install "${missing[@]}"
    local python="${SWITCHYARD_PYTHON:?ensure_python_clients comes first}"
    if ! "$python" -c 'import selenium' 2>/dev/null; then
        say "installing selenium $SELENIUM_VERSION into $(dirname "$(dirname "$python")")"
        "$python" -m pip install -q "selenium==$SELENIUM_VERSION"
    fi
}

# llama.cpp's `llama-server` for the llama-cpp engine's suite, built once from
# the sources that the pinned llama-cpp-python source distribution on PyPI
# vendors and kept beside the build (about 7 minutes on 2 cores); and the
# `gguf` package in the Python clients' venv, which writes the suite's tiny
# model. Needs ensure_python_clients first.
LLAMA_CPP_PYTHON_VERSION=0.3.36
ensure_llama_server() {
    local python="${SWITCHYARD_PYTHON:?ensure_python_clients comes first}"
    if ! "$python" -c 'import gguf, numpy' 2>/dev/null; then
        say "installing the gguf Python package into $(dirname "$(dirname "$python")")"
        "$python" -m pip install -q gguf numpy
    fi
    local bin="$CARGO_TARGET_DIR/llama.cpp/llama-server"
    if [[ ! -x "$bin" ]]; then
        local missing=()
        command -v cmake >/dev/null || missing+=(cmake)
        command -v ninja >/dev/null || missing+=(ninja-build)
        { command -v cc && command -v c++ && command -v make; } >/dev/null || missing+=(build-essential)
        [[ ${#missing[@]} -eq 0 ]] || apt_install "${missing[@]}"
        (
            set -e
            work=$(mktemp -d /tmp/switchyard-llama-cpp.XXXXXX)
            trap 'rm -rf "$work"' EXIT
            say "downloading llama-cpp-python $LLAMA_CPP_PYTHON_VERSION's sources from PyPI (they vendor llama.cpp)"
            "$python" -m pip download -q --no-binary :all: --no-deps -d "$work" \
                "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
            tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
            say "building llama-server into $bin (about 7 minutes on 2 cores, once)"
            # LLAMA_USE_PREBUILT_UI=OFF: otherwise the build downloads the web UI.
            cmake -S "$work"/llama_cpp_python-*/vendor/llama.cpp -B "$work/build" -G Ninja \
                -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
                -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
                -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
                -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF >"$work/build.log" 2>&1 &&
                cmake --build "$work/build" --target llama-server -j 2 >>"$work/build.log" 2>&1 ||
                { tail -n 40 "$work/build.log"; exit 1; }
            mkdir -p "$(dirname "$bin")"
            cp "$work/build/bin/llama-server" "$bin.partial"
            mv "$bin.partial" "$bin"
        )
    fi
    export SWITCHYARD_LLAMA_SERVER="$bin"
}

# The tools that build policies written in Python and JavaScript, pinned and
# installed once beside the build (only from PyPI and npm): componentize-py
# in a venv of its own, jco (with its QuickJS backend) in a node_modules
# folder. Exports COMPONENTIZE_PY and JCO, the commands the examples' and
# `switchyard policy new`'s build scripts run. Needs use_target_dir first.
COMPONENTIZE_PY_VERSION=0.25.1
JCO_VERSION=1.35.0
ensure_policy_toolchains() {
    local venv="$CARGO_TARGET_DIR/componentize-py"
    if ! "$venv/bin/componentize-py" --version 2>/dev/null | grep -qx "componentize-py $COMPONENTIZE_PY_VERSION"; then
        if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
            apt_install python3 python3-venv
        fi
        say "installing componentize-py $COMPONENTIZE_PY_VERSION from PyPI into $venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q "componentize-py==$COMPONENTIZE_PY_VERSION"
    fi
    export COMPONENTIZE_PY="$venv/bin/componentize-py"
    local tools="$CARGO_TARGET_DIR/js-tools"
    if ! grep -qs "\"version\": \"$JCO_VERSION\"" "$tools/node_modules/@bytecodealliance/jco/package.json"; then
        command -v npm >/dev/null || apt_install nodejs npm
        say "installing jco $JCO_VERSION from npm into $tools"
        mkdir -p "$tools"
        (cd "$tools" && npm install --no-audit --no-fund --silent "@bytecodealliance/jco@$JCO_VERSION")
    fi
    export JCO="$tools/node_modules/.bin/jco"
}

# Builds the Python and JavaScript model-allowlist examples into
# $SWITCHYARD_PLUGINS_DIR (model-allowlist-python.wasm, model-allowlist-js.wasm).
# Exports COMPONENTIZE_PY and JCO for the suites that build `policy new`'s
# scaffolds.
build_policy_examples() {
    ensure_policy_toolchains
    say "building the Python and JavaScript policy examples"
    scripts/build-policy-examples.sh >/dev/null
}

# Where builds go, and the guest components built into it.
use_target_dir() {
    export CARGO_TARGET_DIR
    CARGO_TARGET_DIR=$(default_target_dir)
    export SWITCHYARD_PLUGINS_DIR="$CARGO_TARGET_DIR/plugins"
    # A reused target folder only grows: incremental caches of every past
    # clone pile up there (a CI run once failed with the disk full). Builds
    # here run once per clone, so they keep none, and old ones are dropped
    # when the disk runs low.
    export CARGO_INCREMENTAL=0
    # On a fresh machine neither the folder nor its parent exists yet.
    mkdir -p "$CARGO_TARGET_DIR"
    local free_kib
    free_kib=$(df -Pk "$(dirname "$CARGO_TARGET_DIR")" | awk 'NR==2 {print $4}')
    if (( free_kib < 20 * 1024 * 1024 )) && [[ -d "$CARGO_TARGET_DIR/debug" ]]; then
        say "less than 20 GiB free: dropping the old debug builds in $CARGO_TARGET_DIR"
        rm -rf "$CARGO_TARGET_DIR/debug/incremental" "$CARGO_TARGET_DIR/debug/deps"
    fi
}

# Builds every guest into $SWITCHYARD_PLUGINS_DIR; the `switchyard` binary
# built after this embeds the shipped ones from there instead of building
# them a second time (host/artifacts/build.rs).
build_guests() {
    say "building the guest components (wasm32-wasip2)"
    scripts/build-guests.sh >/dev/null
    export SWITCHYARD_PREBUILT_GUESTS="$SWITCHYARD_PLUGINS_DIR"
}

# cargo-fuzz (from crates.io) builds the fuzz targets in fuzz/ with
# libFuzzer; installed once into ~/.cargo/bin (about 2 minutes on 2 cores).
CARGO_FUZZ_VERSION=0.13.2
ensure_cargo_fuzz() {
    if ! cargo fuzz --version >/dev/null 2>&1; then
        say "installing cargo-fuzz $CARGO_FUZZ_VERSION from crates.io"
        cargo install -q --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
    fi
}

# The fuzz targets: one file each in fuzz/fuzz_targets.
fuzz_target_names() {
    local file
    for file in fuzz/fuzz_targets/*.rs; do basename "$file" .rs; done
}

# Builds the fuzz targets into $CARGO_TARGET_DIR/fuzz (their instrumentation
# differs from the workspace's build), then runs each given target (all by
# default) with libFuzzer, one at a time, for SECONDS or until FUZZ_RUNS
# executions (10 million by default), whichever comes first: the committed seeds
# (fuzz/corpus/<target>, read only) plus the corpus grown by earlier runs
# ($CARGO_TARGET_DIR/fuzz/corpus/<target>). Prints executions and exec/s per
# target; returns non-zero if any target crashed, hung (10 s on one input) or
# ran out of memory, naming the input that did it.
# Usage: run_fuzzers SECONDS [TARGET...]
run_fuzzers() {
    local seconds=$1
    shift
    local targets=("$@")
    [[ ${#targets[@]} -gt 0 ]] || mapfile -t targets < <(fuzz_target_names)
    ensure_cargo_fuzz
    local dir="$CARGO_TARGET_DIR/fuzz"
    # No sanitizer: the stable toolchain has none, and the code is safe Rust;
    # the targets check bounds, round trips and memory themselves.
    say "building the fuzz targets into $dir (cargo fuzz build --sanitizer none)"
    mkdir -p "$dir"
    if ! (cd fuzz && cargo fuzz build -s none --target-dir "$dir") >"$dir/build.log" 2>&1; then
        tail -n 40 "$dir/build.log" >&2
        say "building the fuzz targets failed (log: $dir/build.log)"
        return 1
    fi
    local bin target failed=0
    bin="$dir/$(rustc -vV | sed -n 's/^host: //p')/release"
    for target in "${targets[@]}"; do
        if [[ ! -x "$bin/$target" ]]; then
            say "no fuzz target $target (have: $(fuzz_target_names | tr '\n' ' '))"
            failed=1
            continue
        fi
        local corpus="$dir/corpus/$target" artifacts="$dir/artifacts/$target" log="$dir/logs/$target.log"
        mkdir -p "$corpus" "$artifacts" "$dir/logs"
        say "fuzzing $target for ${seconds}s or ${FUZZ_RUNS:-10000000} executions (log: $log)"
        local rc=0
        "$bin/$target" -max_total_time="$seconds" -runs="${FUZZ_RUNS:-10000000}" \
            -timeout=10 -rss_limit_mb=2048 \
            -print_final_stats=1 -artifact_prefix="$artifacts/" \
            "$corpus" "fuzz/corpus/$target" >"$log" 2>&1 || rc=$?
        local runs rate crash
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
        if [[ $rc -eq 0 ]]; then
            say "$target: ${runs:-?} executions, ${rate:-?} exec/s, corpus $(ls "$corpus" | wc -l) inputs"
        else
            crash=$(sed -n 's/.*Test unit written to //p' "$log" | tail -n 1)
            grep -m 1 -A 4 -E 'panicked at|ERROR: libFuzzer' "$log" >&2 || tail -n 20 "$log" >&2
            say "$target: FAILED (exit $rc) after ${runs:-?} executions; input: ${crash:-none written}"
            [[ -z "$crash" ]] || say "reproduce: $bin/$target $crash"
            failed=1
        fi
    done
    return $failed
}

# The fuzz targets for a few seconds each (12 by default), for the test
# command: under 2 minutes in all with a warm build (each run also spends a
# second or two loading its grown corpus).
run_fuzzers_briefly() {
    run_fuzzers "${1:-12}"
}
