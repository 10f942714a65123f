#!/usr/bin/env bash
# Every benchmark, one after another. GPUFLEET_BENCH_QUICK=1: tiny counts, no timing judged, a
# non-zero exit only when something is broken (what tests/run-all.sh runs). Full mode (default):
# the measurements of docs/benchmarks.md; results in bench/results/, and the markdown to paste
# there in bench/results/benchmarks-latest.md. `bench/run-all.sh scale planner` runs only those.
# Needs root, sshd, cmake, ninja and a C compiler (tests/system-deps.sh), and `make setup`.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tests/env.sh
. tests/env.sh
export PYTHONUNBUFFERED=1

BENCHES=("$@")
[ ${#BENCHES[@]} -gt 0 ] || BENCHES=(fleet_preflight process_scan argv_scan scale planner timeline_cpu build_holder health_check reports_500 replay replay_product eta_replay)
failed=()
for bench in "${BENCHES[@]}"; do
  printf '\n===== bench/%s.py%s =====\n' "$bench" "${GPUFLEET_BENCH_QUICK:+ (quick)}"
  if ! "$VENV/bin/python" "bench/$bench.py"; then
    failed+=("$bench")
  fi
done

if [ -z "${GPUFLEET_BENCH_QUICK:-}" ] || [ "${GPUFLEET_BENCH_QUICK}" = 0 ]; then
  out=bench/results/benchmarks-latest.md
  {
    echo "<!-- bench/run-all.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r) -->"
    for bench in "${BENCHES[@]}"; do
      [ -f "bench/results/$bench-latest.md" ] && { cat "bench/results/$bench-latest.md"; echo; }
    done
  } > "$out"
  echo "markdown for docs/benchmarks.md: $out"
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "benchmarks broken: ${failed[*]}" >&2
  exit 1
fi
echo "benchmarks ran: ${BENCHES[*]}"
