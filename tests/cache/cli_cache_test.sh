#!/usr/bin/env bash
# kiln cache ls|stats|clear|export|import end to end: usage: cli_cache_test.sh KILN WORKDIR
set -euo pipefail
K=$1
W=$2
rm -rf "$W"
mkdir -p "$W"
fail() { echo "FAIL: $*"; exit 1; }
export KILN_CACHE_DIR=$W/a

$K cache stats | grep -q "^entries: 0$" || fail "stats of an empty cache"
$K cache bench-one sincos --small | grep -q "^first_ms " || fail "bench-one"
$K cache ls > "$W/ls.txt"
n=$(wc -l < "$W/ls.txt")
[ "$n" -ge 1 ] || fail "ls lists nothing after a compile"
grep -q "cpu.graph: " "$W/ls.txt" || fail "ls has no description: $(cat "$W/ls.txt")"
$K cache stats | grep -q "^entries: $n$" || fail "stats disagrees with ls"

# A warm run compiles nothing.
KILN_ASSERT_NO_COMPILE=1 $K cache bench-one sincos --small > /dev/null || fail "warm run compiled"

# Export, import elsewhere, run warm from the imported entries.
$K cache export "$W/x.bundle" | grep -q "^exported $n entries" || fail "export"
KILN_CACHE_DIR=$W/b $K cache import "$W/x.bundle" | grep -q "^imported $n entries into $W/b$" || fail "import"
KILN_CACHE_DIR=$W/b KILN_ASSERT_NO_COMPILE=1 $K cache bench-one sincos --small > /dev/null || fail "run from an imported bundle compiled"

# A bundle of another format version loads nothing, says why, and exits 1.
cp "$W/x.bundle" "$W/v7.bundle"
printf '\x07' | dd of="$W/v7.bundle" bs=1 seek=8 conv=notrunc status=none
set +e
out=$(KILN_CACHE_DIR=$W/c $K cache import "$W/v7.bundle" 2>&1)
rc=$?
set -e
[ $rc -eq 1 ] || fail "importing a version-7 bundle exited $rc"
echo "$out" | grep -q "imported 0 entries.*format version 7, this build reads version 1" || fail "no reason: $out"
[ -z "$(ls -A "$W/c" 2>/dev/null)" ] || fail "a refused bundle left entries"

# A damaged entry is shown as damaged by ls.
f=$(ls "$W/a"/*.kce | head -1)
printf 'garbage' > "$f"
$K cache ls | grep -q "damaged: .*not a Kiln cache entry" || fail "ls does not flag a damaged entry"

$K cache clear | grep -q "^removed $n entr" || fail "clear"
$K cache stats | grep -q "^entries: 0$" || fail "stats after clear"
set +e
$K cache frobnicate > /dev/null 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "an unknown subcommand exited $rc"
echo "cli_kiln_cache: OK"
