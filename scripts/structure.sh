#!/usr/bin/env bash
# The shape of the tree, in numbers, held against a ratchet: lines per host
# crate (and the server's share), product files over 600 lines, product
# functions over 100 lines, admin handlers answering `Json<Value>`, and,
# where the `duplicates` tool is installed, identical duplicate runs in
# product code. Product code is every `.rs` file outside tests, fuzz
# targets and benches.
#
#   scripts/structure.sh            print the table; exit 1 if a count grew
#                                   past scripts/structure-ratchet
#   scripts/structure.sh --update   print it and lower the ratchet to today
#
# The ratchet only goes down: a change that adds a long file or function,
# or another untyped answer, fails here (scripts/test.sh runs it) instead of
# waiting for a reviewer. docs/architecture.md quotes the numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import os, re, subprocess, sys

RATCHET = "scripts/structure-ratchet"
MAX_FILE, MAX_FN = 600, 100
update = "--update" in sys.argv[1:]

def product(path):
    return (path.endswith(".rs")
            and not re.search(r"(^|/)(tests?|fuzz|benches|target)/", path)
            and not path.endswith("_test.rs")
            and os.path.basename(path) != "tests.rs")

files = []
for top in ("host", "plugins", "sdk", "policies", "wit"):
    for root, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if d not in ("target",)]
        files += [os.path.join(root, n) for n in names if product(os.path.join(root, n))]
files.sort()

FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")

def code_lines(text):
    """The lines of a file up to its unit-test module (`#[cfg(test)]` then `mod`)."""
    lines = text.split("\n")
    for i, line in enumerate(lines[:-1]):
        if line.strip() == "#[cfg(test)]" and lines[i + 1].lstrip().startswith("mod "):
            return lines[:i]
    return lines

def long_functions(path, lines):
    """Functions whose body spans more than MAX_FN lines, by brace count
    (strings and comments with braces are rare enough to ignore)."""
    found, i = [], 0
    while i < len(lines):
        m = FN.match(lines[i])
        if not m:
            i += 1
            continue
        depth, opened, j = 0, False, i
        while j < len(lines):
            text = lines[j].split("//")[0]
            depth += text.count("{") - text.count("}")
            opened = opened or "{" in text
            if (opened and depth <= 0) or (not opened and text.rstrip().endswith(";")):
                break
            j += 1
        length = j - i + 1
        if opened and length > MAX_FN:
            found.append((length, f"{path}:{i + 1} {m.group(7)}"))
        i = i + 1 if not opened else i + 1
    return found

crates, long_files, long_fns, untyped = {}, [], [], []
for path in files:
    text = open(path, encoding="utf-8", errors="replace").read()
    n = text.count("\n")
    parts = path.split("/")
    crate = "/".join(parts[:2]) if parts[0] == "host" else parts[0]
    crates[crate] = crates.get(crate, 0) + n
    if n > MAX_FILE:
        long_files.append((n, path))
    lines = code_lines(text)
    long_fns += long_functions(path, lines)
    if path.startswith("host/server/"):
        untyped += [f"{path}:{k + 1}" for k, l in enumerate(lines)
                    if re.search(r"->.*Json<(serde_json::)?Value>", l)]

dups = None
try:
    out = subprocess.run(["duplicates", "--most", "200", "--seconds", "120"],
                         capture_output=True, text=True, timeout=180)
    rows = [l for l in out.stdout.splitlines() if re.match(r"^D\d+ ", l)]
    # An identical run: a row not marked `shape`, both of whose places are product code.
    dups = sum(1 for l in rows if "shape" not in l
               and all(product(p) for p in re.findall(r"(\S+\.rs):\d+", l)))
except (FileNotFoundError, subprocess.TimeoutExpired):
    pass

total = sum(crates.values())
server = crates.get("host/server", 0)
counts = {
    "files_over_600": len(long_files),
    "functions_over_100": len(long_fns),
    "json_value_handlers": len(untyped),
}
if dups is not None:
    counts["identical_duplicate_runs"] = dups
print("crate lines (product code):")
for crate, n in sorted(crates.items(), key=lambda c: -c[1]):
    print(f"  {crate:28} {n:7}")
print(f"  {'total':28} {total:7}   server share {100 * server / max(total, 1):.0f} %")
print(f"\nproduct files over {MAX_FILE} lines: {len(long_files)}")
for n, p in sorted(long_files, reverse=True):
    print(f"  {n:5}  {p}")
print(f"\nproduct functions over {MAX_FN} lines: {len(long_fns)}")
for n, p in sorted(long_fns, reverse=True):
    print(f"  {n:5}  {p}")
print(f"\nserver functions answering Json<Value>: {len(untyped)}")
print("identical duplicate runs in product code: " + ("not counted (no `duplicates` tool here)" if dups is None else str(dups)))

ratchet = {}
if os.path.exists(RATCHET):
    for line in open(RATCHET):
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            ratchet[k.strip()] = int(v)
grew = [f"{k}: {v} (ratchet {ratchet[k]})" for k, v in counts.items() if k in ratchet and v > ratchet[k]]
if grew:
    print("\nthe tree grew past its ratchet (split by concept, type the answer, share the code):\n  "
          + "\n  ".join(grew))
    sys.exit(1)
if update:
    kept = {k: v for k, v in ratchet.items() if k not in counts}
    with open(RATCHET, "w") as f:
        f.write("# The most each count may be (scripts/structure.sh); lowered by --update, raised only by hand with the reason beside it.\n")
        for k, v in {**kept, **counts}.items():
            f.write(f"{k}={v}\n")
    print(f"\nratchet lowered to today's counts in {RATCHET}")
else:
    print("\nwithin the ratchet" if ratchet else "\nno ratchet yet: scripts/structure.sh --update writes one")
PY
