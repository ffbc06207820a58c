#!/usr/bin/env bash
# The counting field on a many-core benchmark machine, from what benches/device/bundle.py
# left in .device/ (carried there: no package index is reached). Run from the repository's
# root; what it measures lands in $OUT (else target/device), in at most the 8 files a lent
# machine sends back: the machine's description, the reports' markdown, their errors, and
# one JSON file a part.
#
# Parts, most wanted first, each under its own time limit so that one that overruns costs
# only itself (the JSON is written cell by cell, the markdown at a part's end): the 25 MB
# source-code batch on every core and on one against gigatoken and fastokens; then the
# field's corpora, single texts and batches on every core, one corpus a part. The limits add
# up to under 8 minutes, for a machine lent for 15 minutes in all, its start included; they
# were not yet tried on such a machine (on a 2-core one every part overruns them).
set -uo pipefail

bundle=.device
out=${OUT:-target/device}
mkdir -p "$out"
py=python$(cat "$bundle/python")

site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
tar xJf "$bundle/site.tar.xz" -C "$site"
"$py" -m zipfile -e "$bundle"/windowfit-*.whl "$site/site"
export PYTHONPATH="$site/site"
export WINDOWFIT_O200K_VOCAB="$PWD/$bundle/o200k_base.tiktoken.gz"

{
  echo "commit $(cat "$bundle/commit" 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
  echo "$(nproc) cores; $("$py" --version)"
  lscpu | grep -E '^(Model name|L3 cache|Thread)'
  echo "transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
  uptime
} >"$out/machine.txt"

part() {
  local name=$1 limit=$2
  shift 2
  echo "$(date -u +%T) $name" >>"$out/machine.txt"
  printf '\n# %s\n\n' "$name" | tee -a "$out/reports.md" >>"$out/errors.txt"
  timeout "$limit" "$py" -u benches/reports/report_field.py "$@" --json "$out/$name.json" \
    >>"$out/reports.md" 2>>"$out/errors.txt"
  local rc=$?
  [ "$rc" -eq 0 ] || echo "$name: exit $rc (124: over its ${limit} s)" >>"$out/machine.txt"
}

part batch-all-source 200 --runs 2 --batch-only --threads 1 \
  --corpora "all source code" --contenders windowfit gigatoken fastokens
part field-source 100 --runs 2 --corpora "source code"
part field-multilingual 90 --runs 2 --corpora "multilingual dialog"
part field-english 70 --runs 2 --corpora "English dialog"
uptime >>"$out/machine.txt"
