#!/usr/bin/env bash
# Every test of the collection, in the order that fails fastest. `make test` runs all stages;
# `tests/run-all.sh units fleet` runs only those. Expects `make setup` to have run (the Makefile does).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/env.sh
. tests/env.sh
# The build_deps torch test installs the local CPU torch wheel (about a minute): part of the full suite.
export BUILD_DEPS_TEST_TORCH=${BUILD_DEPS_TEST_TORCH:-1}
STAGES=("$@")
# With no stage named: every stage, in two lanes side by side (below), after vm-images, which builds and boots the
# test VMs in the background while the lanes run; vm, last in its lane, waits for them.
# The lanes are balanced by the seconds each stage took alone (docs/benchmarks.md): most stages wait on sshd nodes,
# Slurm, nvcc and VMs more than they compute, so two of them share the 2 cores with little loss. Tests that look at
# the whole host (/proc, build processes) find their own processes by unique markers, never by "nothing else runs".
LANE_A=(units lint sanity integration sweep host roles build-check bench-quick vm)
LANE_B=(build fleet scheduler)

# Node-side code must run on every Python that ansible-core supports on targets and this machine has.
node_pythons() {
  local v found=()
  for v in 3.8 3.9 3.10 3.11 3.12 3.13; do
    for dir in /root/.pyenv/versions/"$v".*/bin; do
      [ -x "$dir/python$v" ] && { found+=("$dir"); break; }
    done
  done
  printf '%s\n' "${found[@]}"
}

# ansible-test insists on a physical .../ansible_collections/<ns>/<name>/ path: copy the tracked tree there.
ansible_test_tree() {
  local dest=${TMPDIR:-/tmp}/gpufleet-ansible-test/ansible_collections/gpufleet/preflight
  rm -rf "$dest" && mkdir -p "$dest"
  git ls-files -co --exclude-standard -z | xargs -0 cp -P --parents -t "$dest"/
  # ansible-test bootstraps pip in its venvs with a script from ci-files.testing.ansible.com; ours uses ensurepip + PyPI.
  mkdir -p ~/.ansible/test/cache
  cp tests/tools/offline_get_pip.py ~/.ansible/test/cache/get_pip_24_2.py
  echo "$dest"
}

# tests/tools/ci_no_skip.py: with CI=true a skipped test fails; checkout_clean.py: a test that leaves reports in the
# checkout fails.
export PYTHONPATH="$PWD/tests/tools${PYTHONPATH:+:$PYTHONPATH}"

stage() { printf '\n===== %s [%s] =====\n' "$1" "$(date -u +%H:%M:%S)"; }
# How long each stage took, printed at the end (docs/benchmarks.md keeps a full run's figures). A lane started by
# run_lanes appends its stages to the file GPUFLEET_STAGE_TIMES names, for the parent's table.
TIMES=()

# Every stage: vm-images here, then the two lanes, each a run of this script, side by side. Each lane's lines come out
# as they happen, prefixed with the lane's letter, and whole in .tmp/test-logs/lane-X.log. A lane that fails stops the
# other (so CI fails in minutes, not at the longer lane's end); the exit code is the first failure's.
run_lanes() {
  local logs=.tmp/test-logs times pid_a pid_b rc_a rc_b started=$SECONDS
  mkdir -p "$logs"
  times=$logs/stage-times
  : > "$times"
  stage "test VMs (Debian 12 + 13 under QEMU): image build or cache, boot, in the background (tests/vm/README.md)"
  trap 'python3 tests/vm/vmlib.py down >/dev/null 2>&1 || true' EXIT
  python3 tests/vm/vmlib.py up --background || echo "vm-images: not started; the vm stage says why"
  printf '\nlane A: %s\nlane B: %s\n' "${LANE_A[*]}" "${LANE_B[*]}"
  # setsid: each lane leads its own process group, so stopping a lane stops everything it started
  GPUFLEET_STAGE_TIMES=$times setsid "$0" "${LANE_A[@]}" > >(tee "$logs/lane-A.log" | sed -u 's/^/[A] /') 2>&1 &
  pid_a=$!
  GPUFLEET_STAGE_TIMES=$times setsid "$0" "${LANE_B[@]}" > >(tee "$logs/lane-B.log" | sed -u 's/^/[B] /') 2>&1 &
  pid_b=$!
  rc_a=running rc_b=running
  while [ "$rc_a" = running ] || [ "$rc_b" = running ]; do
    local ended="" rc waiting=()
    [ "$rc_a" = running ] && waiting+=("$pid_a")
    [ "$rc_b" = running ] && waiting+=("$pid_b")
    wait -n -p ended "${waiting[@]}" 2>/dev/null && rc=0 || rc=$?
    # wait -p unsets its variable first, and leaves it unset when the lane was already reaped
    if [ -z "${ended:-}" ]; then
      # bash had already reaped the lane left (stopped after the other failed): nothing to wait for, it is over
      [ "$rc_a" = running ] && rc_a=$rc
      [ "$rc_b" = running ] && rc_b=$rc
      continue
    fi
    if [ "${ended:-}" = "$pid_a" ]; then rc_a=$rc; else rc_b=$rc; fi
    if [ "$rc" != 0 ]; then
      echo "a lane failed (rc $rc): stopping the other"
      kill -TERM -- "-$pid_a" "-$pid_b" 2>/dev/null || true
    fi
  done
  sleep 1  # the prefixing pipes flush
  printf '\nseconds per stage (two lanes side by side):\n'
  sed 's/^/  /' "$times"
  printf '  %-12s %4ds wall, setup excluded\n' total $((SECONDS - started))
  if [ "$rc_a" != 0 ] || [ "$rc_b" != 0 ]; then
    printf '\nFAILED: lane A rc %s, lane B rc %s (whole logs: %s/lane-A.log, lane-B.log)\n' "$rc_a" "$rc_b" "$logs"
    [ "$rc_a" != 0 ] && exit "$rc_a"
    exit "$rc_b"
  fi
  printf '\nall stages passed: vm-images %s | %s (%ds)\n' "${LANE_A[*]}" "${LANE_B[*]}" $((SECONDS - started))
  exit 0
}
[ ${#STAGES[@]} -gt 0 ] || run_lanes

for s in "${STAGES[@]}"; do
  started=$SECONDS
  case "$s" in
    units)
      stage "unit tests (pytest, table-driven, on captured fixtures), then ansible-test units on 3.11 and the oldest node Python"
      pytest -q -p no:cacheprovider -p ci_no_skip -p checkout_clean tests/unit
      tree=$(ansible_test_tree)
      (cd "$tree" && ansible-test units --requirements --python 3.11 --color no)
      # Node-side code (modules, module_utils) must work on the oldest Python a node may run.
      oldest=$(node_pythons | head -n 1)
      if [ -n "$oldest" ]; then
        version=$(basename "$(dirname "$oldest")" | cut -d. -f1-2)
        (cd "$tree" && PATH="$oldest:$PATH" ansible-test units --requirements --python "$version" --color no)
      elif [ "${CI:-}" = true ]; then
        echo "units: no node Python 3.8-3.13 under /root/.pyenv; CI must test the oldest node Python" >&2; exit 1
      else
        echo "units: no node Python under /root/.pyenv; oldest-Python unit run skipped"
      fi ;;
    lint)
      stage "ansible-lint --profile production (the whole collection, .ansible-lint) + antsibull-changelog lint + antsibull-docs lint"
      # separate commands, not `a && b`: set -e does not stop on the first of an && list, so a lint failure went unseen
      ansible-lint --profile production --offline
      antsibull-changelog lint
      # every plugin's and role's documentation as the docs site (`make docs`) renders it: schema, markup, references
      antsibull-docs lint-collection-docs --plugin-docs . ;;
    sanity)
      stage "ansible-test sanity (node-side Pythons: $(node_pythons | sed 's#.*/versions/##; s#/bin##' | tr '\n' ' '))"
      tree=$(ansible_test_tree)
      extra_path=$(node_pythons | tr '\n' ':')
      (cd "$tree" && PATH="$extra_path$PATH" ansible-test sanity --requirements --color no) ;;
    integration)
      stage "ansible-test integration (this host: real /proc, cgroups, nvcc)"
      tree=$(ansible_test_tree)
      (cd "$tree" && ansible-test integration --requirements --python 3.11 --color no) ;;
    sweep)
      stage "bad-input sweep (tests/sweep: every module, action, filter and role variable family through Ansible)"
      pytest -q -s -p no:cacheprovider -p ci_no_skip -p checkout_clean --durations=8 tests/sweep ;;
    host|build|roles|fleet|scheduler)
      stage "pytest tests/$s (real processes, cgroups, sshd nodes)"
      if [ -d "tests/$s" ]; then pytest -q -p no:cacheprovider -p ci_no_skip -p checkout_clean --durations=8 "tests/$s"; else echo "tests/$s: none yet"; fi ;;
    build-check)
      stage "ansible-galaxy collection build, install into an empty path, run the preflight from it"
      tests/build-check.sh ;;
    vm-images)
      stage "test VMs (Debian 12 + 13 under QEMU): image build or cache, boot, in the background (tests/vm/README.md)"
      # stopped when this script ends, however it ends; the vm stage itself stops them after its tests
      trap 'python3 tests/vm/vmlib.py down >/dev/null 2>&1 || true' EXIT
      python3 tests/vm/vmlib.py up --background || echo "vm-images: not started; the vm stage says why" ;;
    vm)
      stage "pytest tests/vm (real systemd + cgroup v2 nodes: Debian VMs over ssh)"
      pytest -q -p no:cacheprovider -p ci_no_skip -p checkout_clean --durations=8 tests/vm ;;
    bench-quick)
      stage "benchmarks in quick mode (no timing asserted)"
      if [ -x bench/run-all.sh ]; then GPUFLEET_BENCH_QUICK=1 bench/run-all.sh; else echo "bench: none yet"; fi ;;
    *) echo "unknown stage $s" >&2; exit 2 ;;
  esac
  TIMES+=("$(printf '%-12s %4ds' "$s" $((SECONDS - started)))")
  [ -z "${GPUFLEET_STAGE_TIMES:-}" ] || printf '%-12s %4ds  (%s)\n' "$s" $((SECONDS - started)) "$(date -u +%H:%M:%S)" >> "$GPUFLEET_STAGE_TIMES"
done
printf '\nseconds per stage:\n'
printf '  %s\n' "${TIMES[@]}"
printf '\nall stages passed: %s (%ds)\n' "${STAGES[*]}" "$SECONDS"
