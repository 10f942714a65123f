#!/usr/bin/env bash
# Field test on the REAL sgl-kernel tree (it cannot run in CI, which has no copy of the sources):
#   1. every FetchContent name (nested included) found in OFFLINE, or stop with the list of missing names;
#   2. configure as upstream ships it (all architectures) and count the CUDA compile steps;
#   3. configure for the fleet's GPUs only (roles/sgl_kernel/files/gpufleet_arch_filter.cmake) and count
#      again, refusing when another architecture is left in build.ninja;
#   4. compile N real CUDA objects of the SM120-only tree under gpufleet.preflight.guarded_build (one job),
#      recording each step's time (.ninja_log) and the peak memory of every compiler process
#      (bench/field_test_sampler.py) and of the build cgroup.
# Usage (from the repository root, after `make setup`):
#   SGL_SRC=/path/sglang/sgl-kernel SGL_OFFLINE=/path/offline-sources SGL_VENV=/path/venv-with-torch \
#     [SGL_COMMIT=<sglang commit>] [FIELD_N=2] [FIELD_ARCHS=120] [FIELD_OUT=bench/results/field-test] \
#     [FIELD_MEMORY_LIMIT=12GiB] [CUDA_DRIVER_STUB=/path/libcuda.so] bench/field_test.sh
# or `make field-test` with the same variables. Results: $FIELD_OUT/{summary.json,field-test.md}.
set -euo pipefail
cd "$(dirname "$0")/.." || exit 1
: "${SGL_SRC:?set SGL_SRC to the sgl-kernel folder of an sglang checkout}"
: "${SGL_OFFLINE:?set SGL_OFFLINE to the offline sources (one folder per FetchContent name)}"
: "${SGL_VENV:?set SGL_VENV to a venv with torch (CUDA build matching nvcc), cmake, ninja}"
N=${FIELD_N:-2}
ARCHS=${FIELD_ARCHS:-120}
OUT=${FIELD_OUT:-bench/results/field-test}
LIMIT=${FIELD_MEMORY_LIMIT:-12GiB}
DROP=${FIELD_DROP_TARGETS:-common_ops_sm90_build}
OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
# shellcheck source=tests/env.sh
. tests/env.sh
FILTER=$PWD/roles/sgl_kernel/files/gpufleet_arch_filter.cmake
export PYTHONPATH="$PWD/plugins/module_utils${PYTHONPATH:+:$PYTHONPATH}"
COMMIT=${SGL_COMMIT:-$(git -C "$SGL_SRC" rev-parse HEAD 2>/dev/null || echo unknown)}
log() { printf '[field-test %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

log "offline sources"
python3 - "$SGL_SRC" "$SGL_OFFLINE" > "$OUT/fetchcontent.json" <<'PY'
import json, sys, _sgl_tree
found = _sgl_tree.scan_fetchcontent(sys.argv[1], sys.argv[2])
json.dump(found, sys.stdout, indent=1)
if found["missing"]:
    sys.exit("missing offline sources (configure would stop on the first): " + ", ".join(found["missing"]))
PY

summary() {  # build dir -> json on stdout
  python3 -c 'import json, sys, _sgl_tree; print(json.dumps(_sgl_tree.read_ninja_summary(sys.argv[1] + "/build.ninja", sys.argv[2].split(","))))' "$1" "$ARCHS"
}
configure() {  # name, extra args
  local name=$1; shift
  local start; start=$(date +%s)
  if [ ! -f "$OUT/$name/build.ninja" ]; then
    nice -n 10 bench/field_test_configure.sh "$SGL_SRC" "$SGL_OFFLINE" "$SGL_VENV" "$OUT/$name" "$@" > "$OUT/$name.configure.log" 2>&1 \
      || { tail -30 "$OUT/$name.configure.log"; exit 1; }
  fi
  echo "$(( $(date +%s) - start ))"
}
log "configure with every architecture upstream hard-codes"
T_ALL=$(configure build-all)
summary "$OUT/build-all" > "$OUT/steps-all.json"
log "configure for sm_$ARCHS only"
T_ONE=$(configure "build-sm$ARCHS" -DCMAKE_PROJECT_INCLUDE="$FILTER" -DGPUFLEET_CUDA_ARCHS="$ARCHS" -DGPUFLEET_DROP_TARGETS="$DROP")
summary "$OUT/build-sm$ARCHS" > "$OUT/steps-sm$ARCHS.json"
python3 - "$OUT/steps-sm$ARCHS.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
if s["other_arch_steps"]:
    sys.exit("refusing: %d CUDA steps still compile for %s, e.g. %s" % (s["other_arch_steps"], s["other_archs"], s["other_examples"]))
PY

# the first N CUDA objects of the library the SM120 loader imports (sgl_kernel/sm100/common_ops)
mapfile -t OBJECTS < <(python3 -c '
import sys, _sgl_tree
steps = _sgl_tree.parse_ninja_cuda_steps(open(sys.argv[1] + "/build.ninja").read())
for s in [s for s in steps if s["target"] == "common_ops_sm100_build"][:int(sys.argv[2])]:
    print(s["output"])' "$OUT/build-sm$ARCHS" "$N")
log "compiling ${#OBJECTS[@]} CUDA objects under guarded_build: ${OBJECTS[*]}"
rm -f "$OUT/build-sm$ARCHS/.ninja_log"
for obj in "${OBJECTS[@]}"; do rm -f "$OUT/build-sm$ARCHS/$obj"; done
python3 bench/field_test_sampler.py "$OUT/build-sm$ARCHS" "$OUT/processes.json" &
SAMPLER=$!
NINJA="$SGL_VENV/bin/ninja"; [ -x "$NINJA" ] || NINJA=ninja
ARGS=$(python3 -c 'import json, sys; print(json.dumps({"argv": ["nice", "-n", "10", sys.argv[1], "-j1"] + sys.argv[5:],
  "chdir": sys.argv[2], "build_dir": sys.argv[3] + "/guarded", "name": "field-test", "jobs": 1,
  "memory_limit": sys.argv[4], "memory_per_thread": "4GiB", "reserve": "1GiB", "max_attempts": 1, "force": True}))' \
  "$NINJA" "$OUT/build-sm$ARCHS" "$OUT" "$LIMIT" "${OBJECTS[@]}")
set +e
# in a PID namespace of its own (FIELD_UNSHARE=0 to skip): on a shared machine, other people's reaping of build
# processes stays in their own namespace and does not reach this build
if [ "${FIELD_UNSHARE:-1}" = 1 ] && command -v unshare > /dev/null; then
  unshare --pid --fork --mount --mount-proc ansible localhost -m gpufleet.preflight.guarded_build -a "$ARGS" > "$OUT/guarded_build.txt" 2>&1
else
  ansible localhost -m gpufleet.preflight.guarded_build -a "$ARGS" > "$OUT/guarded_build.txt" 2>&1
fi
RC=$?
set -e
kill "$SAMPLER"; wait "$SAMPLER" || true
# the module's own verdict (the exit status of unshare + ansible may carry the namespace's teardown)
if grep -q '^localhost | \(CHANGED\|SUCCESS\)' "$OUT/guarded_build.txt"; then RC=0; fi
log "guarded_build rc=$RC"
python3 - "$OUT" "$ARCHS" "$COMMIT" "$T_ALL" "$T_ONE" "$RC" <<'PY'
import json, os, re, subprocess, sys
out, archs, commit, t_all, t_one, rc = sys.argv[1:]
GI = 1024.0 ** 3
all_ = json.load(open(os.path.join(out, "steps-all.json")))
one = json.load(open(os.path.join(out, "steps-sm%s.json" % archs)))
procs = json.load(open(os.path.join(out, "processes.json")))
text = open(os.path.join(out, "guarded_build.txt")).read()
m = text.find("=> ")
result = json.JSONDecoder().raw_decode(text[m + 3:])[0] if m >= 0 else {}
steps = []
log = os.path.join(out, "build-sm%s" % archs, ".ninja_log")
if os.path.exists(log):
    for line in open(log):
        if line.startswith("#"):
            continue
        start, end, _mtime, output = line.split("\t")[:4]
        if output.strip().endswith(".o"):
            steps.append({"output": output.strip(), "seconds": (int(end) - int(start)) / 1000.0})
nvcc = subprocess.run(["nvcc", "--version"], stdout=subprocess.PIPE, universal_newlines=True).stdout.strip().splitlines()[-1]
summary = {"commit": commit, "archs": archs, "steps_all": all_, "steps_one": one, "configure_seconds": [int(t_all), int(t_one)],
           "compiled": steps, "processes": procs, "guarded_build_rc": int(rc),
           "guarded_build": dict((k, result.get(k)) for k in ("msg", "attempts", "peak_memory_human", "duration", "log")),
           "nvcc": nvcc, "cpus": os.cpu_count()}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
lines = ["sgl-kernel at `%s`, %s, %d CPUs; configure %ss (all) / %ss (sm_%s)" % (commit, nvcc, os.cpu_count(), t_all, t_one, archs), "",
         "| build.ninja | CUDA steps | architectures | per target |", "| --- | ---: | --- | --- |"]
for label, s in (("as shipped", all_), ("sm_%s only" % archs, one)):
    lines.append("| %s | %d | %s | %s |" % (label, s["cuda_steps"], " ".join(s["archs"]),
                 ", ".join("%s %d" % (k, v["steps"]) for k, v in s["targets"].items())))
lines += ["", "| object | seconds | cicc | cudafe++ | cc1plus | ptxas | nvcc |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
for step in steps:
    src = os.path.basename(step["output"]).replace(".o", "")
    peaks = {}
    for p in procs["processes"]:
        if p["source"] and src.split(".")[0] in os.path.basename(p["source"]):
            peaks[p["name"]] = max(peaks.get(p["name"], 0), p["peak_bytes"])
    lines.append("| %s | %.0f | %s |" % (src, step["seconds"], " | ".join(
        ("%.2f GiB" % (peaks[n] / GI)) if peaks.get(n) else "-" for n in ("cicc", "cudafe++", "cc1plus", "ptxas", "nvcc"))))
lines += ["", "Peak per process name over the run: " + ", ".join("%s %.2f GiB" % (k, v / GI) for k, v in sorted(procs["by_name"].items(), key=lambda kv: -kv[1])),
          "guarded_build: %s; build cgroup peak %s" % (result.get("msg"), result.get("peak_memory_human"))]
open(os.path.join(out, "field-test.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
exit "$RC"
