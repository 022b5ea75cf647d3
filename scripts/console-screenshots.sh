#!/usr/bin/env bash
# Copies the console's screenshots from the last browser test run
# ($CARGO_TARGET_DIR/console-shots, written by tests/platform/console.rs)
# that docs/console.md shows into docs/console/, shrunk with pngquant (installed
# with apt-get when missing). Run the test first:
#   cargo test -p switchyard-tests --test platform console
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
use_target_dir
command -v pngquant >/dev/null || apt_install pngquant
shots="$CARGO_TARGET_DIR/console-shots"
[[ -d "$shots" ]] || { echo "no screenshots in $shots: run the console test first" >&2; exit 1; }
mkdir -p docs/console
rm -f docs/console/*.png
# The ones docs/console.md shows.
for name in $(grep -o 'console/[a-z0-9-]*\.png' docs/console.md | sed 's|console/||' | sort -u); do
    [[ -f "$shots/$name" ]] || { echo "the run wrote no $name" >&2; exit 1; }
    pngquant --force --quality=60-90 --strip --output "docs/console/$name" -- "$shots/$name"
done
say "$(ls docs/console | wc -l) screenshots in docs/console ($(du -sh docs/console | cut -f1))"
