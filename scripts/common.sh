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
