#!/usr/bin/env bash
# Regenerates the sample graphs into a scratch folder and checks that the committed files in
# this folder are byte-identical (run by CTest as sample_graphs_up_to_date).
#   check_samples.sh MAKE_SAMPLE_GRAPHS SCRATCH_DIR
set -euo pipefail
gen="$1"; scratch="$2"; here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$scratch"; mkdir -p "$scratch"
"$gen" "$scratch" >/dev/null
status=0
for f in "$scratch"/*.json; do
  if ! cmp -s "$f" "$here/$(basename "$f")"; then
    echo "samples/graphs/$(basename "$f") is out of date: run 'ninja update_sample_graphs'" >&2
    status=1
  fi
done
exit $status
