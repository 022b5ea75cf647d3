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
    export SWITCHYARD_PYTHON="$venv/bin/python"
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

# Where builds go, and the guest components built into it.
use_target_dir() {
    export CARGO_TARGET_DIR
    CARGO_TARGET_DIR=$(default_target_dir)
    export SWITCHYARD_PLUGINS_DIR="$CARGO_TARGET_DIR/plugins"
}

build_guests() {
    say "building the guest components (wasm32-wasip2)"
    scripts/build-guests.sh >/dev/null
}
