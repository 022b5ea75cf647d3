#!/usr/bin/env bash
# Builds every guest component (policies, carriers, the example, the test
# fixtures) with the workspace's `guest` profile for wasm32-wasip2 and copies
# them, with readable names, into one folder that the host's tests read (and
# that `SWITCHYARD_PREBUILT_GUESTS` hands to host/artifacts, which embeds the
# shipped ones in the `switchyard` binary).
#
# Usage: scripts/build-guests.sh
#
# Environment:
#   CARGO_TARGET_DIR        cargo's target folder (default: ./target)
#   SWITCHYARD_PLUGINS_DIR  where the components go (default: $CARGO_TARGET_DIR/plugins)
#   CARGO_BUILD_JOBS        parallel jobs, as cargo reads it
#   CARGO_PROFILE_GUEST_*   override the size options of [profile.guest] (Cargo.toml)
set -euo pipefail

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    # The comment block at the top of this file.
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
# A relative CARGO_TARGET_DIR means relative to where the script was called
# from; make it absolute so that cargo and the copies below agree.
if [[ "$TARGET" != /* ]]; then
    TARGET="$OLDPWD/$TARGET"
fi
export CARGO_TARGET_DIR="$TARGET"
PLUGINS="${SWITCHYARD_PLUGINS_DIR:-$TARGET/plugins}"
WASM_TARGET=wasm32-wasip2
OUT_DIR="$TARGET/$WASM_TARGET/guest"

say() { echo "build-guests: $*"; }

if ! rustup target list --installed | grep -qx "$WASM_TARGET"; then
    say "the $WASM_TARGET target is missing; installing it with rustup"
    rustup target add "$WASM_TARGET"
fi

build() {
    say "cargo build --profile guest --target $WASM_TARGET $*"
    cargo build --profile guest --target "$WASM_TARGET" "$@"
}

mkdir -p "$PLUGINS"
copy() { # <cargo output name> <plugin name>
    cp "$OUT_DIR/$1.wasm" "$PLUGINS/$2.wasm"
    say "  -> $PLUGINS/$2.wasm"
}

say "target dir: $TARGET"
say "plugins dir: $PLUGINS"

# Crate (package, output file) and the name each component gets.
GUESTS=(
    "policy-model-allowlist policy_model_allowlist model-allowlist"
    "policy-max-tokens policy_max_tokens max-tokens"
    "policy-rate-limit policy_rate_limit rate-limit"
    "policy-gpu-memory-guard policy_gpu_memory_guard gpu-memory-guard"
    "example-deny-weekends example_deny_weekends deny-weekends"
    "fixture-other-world fixture_other_world other-world"
    "fixture-grant-evaluator fixture_grant_evaluator grant-evaluator"
    "switchyard-plugin-nats switchyard_plugin_nats nats"
    "switchyard-plugin-pgbus switchyard_plugin_pgbus pgbus"
    "switchyard-plugin-tunnel switchyard_plugin_tunnel tunnel"
    "switchyard-plugin-grant-standard switchyard_plugin_grant_standard grant-standard"
)
packages=()
for guest in "${GUESTS[@]}"; do
    read -r package _ _ <<<"$guest"
    packages+=(-p "$package")
done
build "${packages[@]}"
for guest in "${GUESTS[@]}"; do
    read -r _ file name <<<"$guest"
    copy "$file" "$name"
done

# The misbehaving fixture: one crate, one build per feature. Each build
# overwrites the same output file, so copy right after it.
MISBEHAVING=(
    ":well-behaved"
    "endless-loop:endless-loop"
    "memory-hog:memory-hog"
    "panic:panic"
    "hang-settings:hang-settings"
    "sleep:sleep"
    "stderr:stderr"
)
for variant in "${MISBEHAVING[@]}"; do
    feature="${variant%%:*}"
    name="${variant#*:}"
    if [[ -z "$feature" ]]; then
        build -p fixture-misbehaving
    else
        build -p fixture-misbehaving --features "$feature"
    fi
    copy fixture_misbehaving "$name"
done

# The other-world fixture's second build: the policy interface's name with a
# wrong signature (the default build above is the unserved world).
build -p fixture-other-world --features wrong-signature
copy fixture_other_world wrong-signature

# A component starts with the wasm magic and the component layer
# (0d 00 01 00); a core module would have 01 00 00 00.
say "checking the outputs are components:"
status=0
for file in "$PLUGINS"/*.wasm; do
    header="$(od -An -tx1 -N8 "$file" | tr -d ' \n')"
    size="$(wc -c <"$file" | tr -d ' ')"
    if [[ "$header" == "0061736d0d000100" ]]; then
        printf 'build-guests:   %-22s %8d bytes  component\n' "$(basename "$file")" "$size"
    else
        printf 'build-guests:   %-22s %8d bytes  NOT A COMPONENT (%s)\n' "$(basename "$file")" "$size" "$header"
        status=1
    fi
done
exit "$status"
