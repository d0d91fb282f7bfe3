#!/usr/bin/env bash
# kiln cache ls|verify|stats|clear|export|import end to end: usage: cli_cache_test.sh KILN WORKDIR [redis]
# (redis: the build has the Redis store; ls --remote is then tested against a redis-server of
# this script's own)
set -euo pipefail
K=$1
W=$2
REDIS=${3:-no-redis}
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

# verify loads every entry as a hit would; an entry stripped of its artifacts or damaged is
# removed (exit status 1), the rest stay.
$K cache verify > "$W/verify.txt" || fail "verify of a good cache: $(cat "$W/verify.txt")"
tail -1 "$W/verify.txt" | grep -q "^$n ok, 0 removed, 0 skipped in $W/a$" || fail "verify: $(cat "$W/verify.txt")"
cp -r "$W/a" "$W/v"
g=$(ls "$W/v"/*.kce | head -1)
printf 'garbage' > "$g"
set +e
KILN_CACHE_DIR=$W/v $K cache verify > "$W/verify2.txt"
rc=$?
set -e
[ $rc -eq 1 ] || fail "verify with a damaged entry exited $rc"
grep -q "REMOVED: .*not a Kiln cache entry" "$W/verify2.txt" || fail "verify: $(cat "$W/verify2.txt")"
[ ! -e "$g" ] || fail "verify left the damaged entry"
[ "$(ls "$W/v"/*.kce | wc -l)" -eq $((n - 1)) ] || fail "verify removed good entries"

# A damaged entry is shown as damaged by ls.
f=$(ls "$W/a"/*.kce | head -1)
printf 'garbage' > "$f"
$K cache ls | grep -q "damaged: .*not a Kiln cache entry" || fail "ls does not flag a damaged entry"

# ls --remote lists what a compile wrote to Redis (when redis-server is here and the build has a
# Redis client); without the remote cache on it is an error that says how to turn it on.
set +e
out=$($K cache ls --remote 2>&1)
rc=$?
set -e
[ $rc -eq 1 ] && echo "$out" | grep -q "the remote cache is off" || fail "ls --remote with the remote cache off: $rc $out"
if [ "$REDIS" = redis ]; then
  command -v redis-server > /dev/null || fail "redis-server is not installed (.ci/install-deps installs it)"
  # A random port below Linux's ephemeral range (32768-60999, which connections of parallel tests
  # take); another try on another port when something already holds it.
  for attempt in 1 2 3 4 5; do
    port=$(( 20000 + RANDOM % 12000 ))
    redis-server --port $port --bind 127.0.0.1 --save "" --appendonly no > "$W/redis.log" 2>&1 &
    redis_pid=$!
    for _ in $(seq 100); do
      kill -0 $redis_pid 2>/dev/null || break
      (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break
      sleep 0.05
    done
    sleep 0.2  # a server that lost the port to another process exits at once
    kill -0 $redis_pid 2>/dev/null && break
    grep -q "Address already in use" "$W/redis.log" || break
  done
  trap 'kill $redis_pid 2>/dev/null || true' EXIT
  kill -0 $redis_pid 2>/dev/null || fail "redis-server did not start on port $port: $(cat "$W/redis.log")"
  export KILN_REDIS_HOST=127.0.0.1 KILN_REDIS_PORT=$port
  KILN_CACHE_DIR=$W/r KILN_REMOTE_CACHE=1 $K cache bench-one sincos --small > /dev/null || fail "bench-one with Redis"
  KILN_REMOTE_CACHE=1 $K cache ls --remote > "$W/rls.txt" || fail "ls --remote: $(cat "$W/rls.txt")"
  grep -q "cpu.graph: " "$W/rls.txt" || fail "ls --remote lists no compiled graph: $(cat "$W/rls.txt")"
  kill $redis_pid
  wait $redis_pid 2>/dev/null || true
  trap - EXIT
fi

$K cache clear | grep -q "^removed $n entr" || fail "clear"
$K cache stats | grep -q "^entries: 0$" || fail "stats after clear"
set +e
$K cache frobnicate > /dev/null 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "an unknown subcommand exited $rc"
echo "cli_kiln_cache: OK"
