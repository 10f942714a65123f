#!/usr/bin/env bash
# Field test on the REAL sgl-kernel tree, THROUGH THE ROLE (it cannot run in CI, which has no copy of the sources):
# playbooks/build_sgl_kernel.yml on localhost, exactly as a user runs it - build_deps (venv, torch's nvidia/cu13
# libraries, a link-only libcuda stub where no driver is), the offline FetchContent check, the SM120 filter, the
# configure-only check, the guarded build with memory admitted per compile - to a wheel; then the record:
# wall time, per-object times (.ninja_log) and peaks (the admission launcher's peaks.json, and per compiler process
# from bench/field_test_sampler.py), OOM kills, the wheel's size, cuobjdump --list-elf, ldd of the extension and
# pip install of the wheel into a fresh venv (bench/field_test_report.py).
# A rerun resumes where the last one stopped (the role keeps the build directory).
# Usage (from the repository root, after `make setup`; run it niced in the background, it takes hours):
#   SGL_CHECKOUT=/path/sglang SGL_OFFLINE=/path/offline-sources SGL_VENV=/path/venv \
#     [FIELD_ARCHS=120] [FIELD_JOBS=2] [FIELD_MEMORY_LIMIT=16GiB] [FIELD_OUT=bench/results/field-test] \
#     [FIELD_EXTRA_VARS=file.yml] bench/field_test.sh
# or `make field-test` with the same variables. SGL_CHECKOUT holds sgl-kernel/ (an sglang checkout or export);
# SGL_OFFLINE one folder per FetchContent name (playbooks/prepare_offline_sources.yml); SGL_VENV the build venv
# (made by build_deps when missing; torch as build_deps_torch_version says, else what the venv has).
# Results: $FIELD_OUT/{playbook.log,summary.json,field-test.md}.
set -euo pipefail
cd "$(dirname "$0")/.." || exit 1
: "${SGL_CHECKOUT:?set SGL_CHECKOUT to an sglang checkout (the folder holding sgl-kernel/)}"
: "${SGL_OFFLINE:?set SGL_OFFLINE to the offline sources (one folder per FetchContent name)}"
: "${SGL_VENV:?set SGL_VENV to the build venv (with torch built for the CUDA of nvcc)}"
ARCHS=${FIELD_ARCHS:-120}
JOBS=${FIELD_JOBS:-2}
LIMIT=${FIELD_MEMORY_LIMIT:-16GiB}
OUT=${FIELD_OUT:-bench/results/field-test}
OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
# shellcheck source=tests/env.sh
. tests/env.sh
log() { printf '[field-test %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
BUILD="$SGL_CHECKOUT/sgl-kernel/build"
cat > "$OUT/vars.yml" <<EOF
sgl_kernel_gate: false
sgl_kernel_source_type: node
sgl_kernel_checkout_dir: "$SGL_CHECKOUT"
sgl_kernel_subdir: sgl-kernel
sgl_kernel_build_dir: build
sgl_kernel_venv: "$SGL_VENV"
build_deps_venv: "$SGL_VENV"
sgl_kernel_offline_dir: "$SGL_OFFLINE"
sgl_kernel_fetchcontent_offline: true
sgl_kernel_target_archs: "$ARCHS"
sgl_kernel_jobs: $JOBS
sgl_kernel_memory_limit: "$LIMIT"
sgl_kernel_async: 21600
sgl_kernel_poll_interval: 60
sgl_kernel_report_dir: "$OUT/reports"
sgl_kernel_install: false
EOF
printf 'localhost ansible_connection=local ansible_python_interpreter=%s\n' "$(command -v python3)" > "$OUT/inventory.ini"
log "sampling compiler processes under $BUILD"
python3 bench/field_test_sampler.py "$BUILD" "$OUT/processes.json" 2 &
SAMPLER=$!
log "ansible-playbook gpufleet.preflight.build_sgl_kernel (log: $OUT/playbook.log)"
START=$(date +%s)
set +e
ansible-playbook -i "$OUT/inventory.ini" -e @"$OUT/vars.yml" ${FIELD_EXTRA_VARS:+-e @"$FIELD_EXTRA_VARS"} \
  gpufleet.preflight.build_sgl_kernel > "$OUT/playbook.log" 2>&1
RC=$?
set -e
WALL=$(( $(date +%s) - START ))
kill "$SAMPLER" 2> /dev/null || true
wait "$SAMPLER" 2> /dev/null || true
log "playbook rc=$RC after ${WALL}s"
python3 bench/field_test_report.py --build "$BUILD" --venv "$SGL_VENV" --out "$OUT" --wall "$WALL" --rc "$RC" \
  --peaks "${SGL_ADMISSION_PEAKS:-$HOME/.cache/gpufleet/admission/peaks.json}"
exit "$RC"
