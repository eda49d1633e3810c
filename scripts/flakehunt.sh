#!/usr/bin/env bash
# Flake hunt (issue 42): run chosen broker-starting tests N rounds, optionally beside a CPU hog that
# takes both cores, and write a markdown table test x runs x failures with every failure's first
# error line. No reruns: a failure is counted and kept, to be root-caused.
#   bash scripts/flakehunt.sh [-n N] [--hog] [-k K] [-o OUT.md] [-l LABEL] TEST_ID... [-- PYTEST ARGS]
# Each round is one pytest session (-p no:xdist) over the tests, run under the shared heavy lock
# (flock /tmp/bfh-heavy.lock): the lock is held for K rounds (default 1) and released between. With
# --hog, `stress-ng --cpu 2` (Debian package stress-ng) runs for exactly that round.
# Per-round output: reports/flakehunt/<stamp>/round-I.{log,xml}; the table goes to OUT.md (appended)
# and to stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=10
per_lock=1
hog=0
out=""
label=""
tests=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) rounds=$2; shift 2 ;;
    -k) per_lock=$2; shift 2 ;;
    --hog) hog=1; shift ;;
    -o) out=$2; shift 2 ;;
    -l) label=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) tests+=("$1"); shift ;;
  esac
done
if [ ${#tests[@]} -eq 0 ]; then
  echo "flakehunt: name at least one test (e.g. tests/agent/test_liveness.py)" >&2
  exit 2
fi
if [ "$hog" -eq 1 ] && ! command -v stress-ng >/dev/null; then
  echo "flakehunt: --hog needs stress-ng (bash scripts/setup.sh full installs it)" >&2
  exit 2
fi
stamp=$(date -u +%Y%m%d-%H%M%S)
dir=reports/flakehunt/$stamp
mkdir -p "$dir"
[ -n "$label" ] || label="$(date -u +%F) $(git rev-parse --short HEAD 2>/dev/null): N=$rounds$([ "$hog" -eq 1 ] && echo ', beside stress-ng --cpu 2')"

# One round: the hog (if any) lives exactly as long as the pytest session, both inside the lock.
round() {
  local i=$1
  local hog_pid=""
  if [ "$hog" -eq 1 ]; then
    stress-ng --cpu 2 --timeout 3600s --quiet &
    hog_pid=$!
  fi
  .venv/bin/pytest "${tests[@]}" -p no:xdist -p no:cacheprovider -q --no-header \
    --junitxml="$dir/round-$i.xml" "${extra[@]}" >"$dir/round-$i.log" 2>&1
  local rc=$?
  if [ -n "$hog_pid" ]; then
    kill "$hog_pid" 2>/dev/null
    wait "$hog_pid" 2>/dev/null
  fi
  return $rc
}
# K rounds per hold of the lock; each round reports as it ends.
batch() {
  local i t0 rc summary
  for i in "$@"; do
    t0=$(date +%s)
    round "$i"
    rc=$?
    summary=$(grep -E '[0-9]+ (passed|failed|error)' "$dir/round-$i.log" | tail -1)
    echo "round $i/$rounds: rc=$rc $(($(date +%s) - t0))s $summary"
  done
}
first=1
while [ "$first" -le "$rounds" ]; do
  last=$((first + per_lock - 1))
  [ "$last" -le "$rounds" ] || last=$rounds
  flock /tmp/bfh-heavy.lock bash -c \
    "$(declare -p tests extra dir hog rounds); $(declare -f round batch); batch $(seq -s ' ' "$first" "$last")"
  first=$((last + 1))
done
xmls=()
for i in $(seq 1 "$rounds"); do xmls+=("$dir/round-$i.xml"); done
result=$(.venv/bin/python scripts/flakehunt_table.py "$label" "${xmls[@]}")
echo "$result"
[ -z "$out" ] || printf '%s\n' "$result" >>"$out"
grep -q ', 0 failures\.$' <<<"$result"  # exit 0 only when nothing failed
