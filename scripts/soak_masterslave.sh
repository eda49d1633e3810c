#!/usr/bin/env bash
# Flake soak: run the masterslave subset ROUNDS times in a row and stop at the first failing round.
#   bash scripts/soak_masterslave.sh [ROUNDS] [extra pytest args...]
# Each round is the gate exactly as users type it, `pytest scenarios/ -k masterslave` (the plugin
# picks the workers: BFH_WORKERS, default 3).
# Prints one line per round (wall time, result) and a closing "N passed, N failed" line; the
# per-round pytest output is kept in reports/soak-masterslave/round-N.log.
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
shift || true
out=reports/soak-masterslave
mkdir -p "$out"
passed=0
failed=0
for i in $(seq 1 "$rounds"); do
  t0=$(date +%s)
  .venv/bin/pytest scenarios/ -k masterslave "$@" \
    >"$out/round-$i.log" 2>&1
  rc=$?
  dt=$(($(date +%s) - t0))
  summary=$(grep -E '^[=]* ?[0-9]+ (passed|failed)' "$out/round-$i.log" | tail -1)
  echo "round $i/$rounds: rc=$rc ${dt}s ${summary}"
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "round $i failed: see $out/round-$i.log"
    break
  fi
done
echo "soak: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
