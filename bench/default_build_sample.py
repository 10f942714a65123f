#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real sgl-kernel tree's default build, measured one compile at a time (issue 29 item 6).

What the seed's user ran is sgl-kernel's default build: every common source compiled with the tree's whole
``-gencode`` list (seven with CUDA 13 on x86_64) and ``--threads=32``. This script builds one source's nvcc command
line by hand, the way CMake would for ``common_ops_sm100_build`` (or ``_sm90_build``, which adds ``-use_fast_math``),
from the flags in the tree's CMakeLists.txt, and runs it with any subset of the arch list and any ``--threads``,
measuring:

- peak memory: the compile runs in a child memory cgroup (v1 or v2) of its own, with a hard limit (20 GiB by default,
  so no compile endangers a shared machine: an OOM kill there is a result, "> limit"). Every 0.2 s the sampler sums
  VmRSS over the cgroup's processes (the tree: nvcc, cicc, ptxas, cudafe++, cc1plus - in parallel at --threads > 1),
  and keeps each process's VmHWM (the kernel's exact high-water mark, so the largest single process is not missed
  between samples). The cgroup's own peak (memory.max_usage_in_bytes / memory.peak) is recorded too; it also counts
  page cache (nvcc's temporary files), so it is an upper bound.
- wall seconds, and CPU seconds (user + system of nvcc and every child it waited for, from wait4's rusage);
- the load average before and after (the machine is shared).

    default_build_sample.py run --tree SGL_KERNEL --cutlass DIR --flashinfer DIR --torch-include DIR \\
        --cuda-include DIR --source csrc/x.cu [--arch sm_90a ... | --all-arches] [--threads N] [--target sm100] \\
        [--limit-gib 20] --out RESULTS.jsonl [--dry-run]
    default_build_sample.py summarise RESULTS.jsonl [--json OUT.json]

``summarise`` turns the raw records into the per-source x arch table, the --threads table and the fitted model
(peak(threads) against the sum and the max of the per-arch peaks), as JSON and markdown.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

GIB = float(1 << 30)
SAMPLE_SECONDS = 0.2

# sgl-kernel 0.3.19's CMakeLists.txt, SGL_KERNEL_CUDA_FLAGS with the options it turns on by default (BF16, FP8,
# NVFP4 for CUDA >= 12.8) - the -gencode flags and --threads come from default_gencodes() and the caller.
BASE_CUDA_FLAGS = (
    "-DNDEBUG", "-DOPERATOR_NAMESPACE=sgl-kernel", "-O3", "-Xcompiler", "-fPIC", "-std=c++17",
    "-DFLASHINFER_ENABLE_F16", "-DCUTE_USE_PACKED_TUPLE=1", "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1",
    "-DCUTLASS_VERSIONS_GENERATED", "-DCUTLASS_TEST_LEVEL=0", "-DCUTLASS_TEST_ENABLE_CACHED_RESULTS=1",
    "-DCUTLASS_DEBUG_TRACE_LEVEL=0", "--expt-relaxed-constexpr", "--expt-extended-lambda",
    "-Xcompiler=-Wno-clang-format-violations", "-Xcompiler=-Wno-conversion", "-Xcompiler=-Wno-deprecated-declarations",
    "-Xcompiler=-Wno-terminate", "-Xcompiler=-Wfatal-errors", "-Xcompiler=-ftemplate-backtrace-limit=1",
    "-Xcudafe=--diag_suppress=177", "-Xcudafe=--diag_suppress=2361",
    "-DFLASHINFER_ENABLE_BF16", "-DFLASHINFER_ENABLE_FP8", "-DFLASHINFER_ENABLE_FP8_E4M3",
    "-DFLASHINFER_ENABLE_FP8_E5M2", "-DENABLE_NVFP4=1",
)
# What CMake adds around them: target_compile_definitions, the Release build type, torch's TORCH_CXX_FLAGS, the
# tree's CXX11 ABI probe, Python_add_library(... USE_SABI 3.10 ...) and a MODULE library's <target>_EXPORTS.
CMAKE_DEFINES = (
    "-DFLASHATTENTION_DISABLE_BACKWARD", "-DFLASHATTENTION_DISABLE_DROPOUT", "-DFLASHATTENTION_DISABLE_UNEVEN_K",
    "-D_GLIBCXX_USE_CXX11_ABI=1", "-DPy_LIMITED_API=0x030A0000",
)
TARGETS = ("sm100", "sm90")


def default_gencodes(cuda_version, machine="x86_64"):
    """The tree's -gencode list in CMakeLists.txt order, as (arch, flag) pairs: sm_90 first (in the base flags),
    then sm_80/89 (ENABLE_BELOW_SM90: on, forced off on aarch64), 100a/120a (CUDA >= 12.8), 103a (13.0;
    110a/121a on aarch64; 101a on aarch64 before 13.0), 90a (CUDA >= 12.4)."""
    version = tuple(int(part) for part in str(cuda_version).split(".")[:2])
    aarch64 = machine == "aarch64"
    archs = ["90"]
    if not aarch64:
        archs += ["80", "89"]
    if version >= (12, 8):
        archs += ["100a", "120a"]
        if version >= (13, 0):
            archs += ["103a"] + (["110a", "121a"] if aarch64 else [])
        elif aarch64:
            archs += ["101a"]
    if version >= (12, 4):
        archs += ["90a"]
    return [("sm_" + arch, "-gencode=arch=compute_%s,code=sm_%s" % (arch, arch)) for arch in archs]


def gencodes_missing_from(cmakelists_text, gencodes):
    """The gencode flags this script would use that the tree's CMakeLists.txt does not contain (a different tree)."""
    return [flag for _arch, flag in gencodes if '"%s"' % flag not in cmakelists_text]


def select_gencodes(gencodes, wanted):
    """The pairs for the arches asked for, in the tree's order; an arch not in the list is an error naming it."""
    known = [arch for arch, _flag in gencodes]
    unknown = [arch for arch in wanted if arch not in known]
    if unknown:
        raise ValueError("arch %s is not in the tree's default list (%s)" % (", ".join(unknown), ", ".join(known)))
    return [(arch, flag) for arch, flag in gencodes if arch in wanted]


def nvcc_argv(nvcc, source, obj, includes, gencodes, threads, target="sm100", cuda_version="13.0"):
    """One CUDA object's command line as CMake writes it for common_ops_<target>_build."""
    if target not in TARGETS:
        raise ValueError("target must be one of %s, got %r" % (", ".join(TARGETS), target))
    argv = [nvcc, "-forward-unknown-to-host-compiler", "-Dcommon_ops_%s_build_EXPORTS" % target]
    argv += list(CMAKE_DEFINES)
    for kind, path in includes:
        argv += ["-isystem", path] if kind == "system" else ["-I" + path]
    argv += ["-O3", "-DNDEBUG"]  # CMAKE_CUDA_FLAGS_RELEASE (pyproject: cmake.build-type = "Release")
    argv += list(BASE_CUDA_FLAGS) + [flag for _arch, flag in gencodes]
    if tuple(int(p) for p in str(cuda_version).split(".")[:2]) >= (13, 0):
        argv.append("--compress-mode=size")
    argv.append("--threads=%d" % threads)
    if target == "sm90":
        argv.append("-use_fast_math")
    argv += ["-x", "cu", "-c", source, "-o", obj]
    return argv


def include_dirs(tree, cutlass, flashinfer, torch_include, cuda_include, python_include, extra=()):
    """(kind, path): the tree's include_directories, the target's INCLUDES that exist here, torch's (system)."""
    dirs = [("user", os.path.join(tree, "include")), ("user", os.path.join(tree, "csrc")),
            ("user", os.path.join(cutlass, "include")), ("user", os.path.join(cutlass, "tools", "util", "include")),
            ("user", os.path.join(flashinfer, "include")), ("user", os.path.join(flashinfer, "csrc"))]
    dirs += [("system", torch_include), ("system", os.path.join(torch_include, "torch", "csrc", "api", "include"))]
    dirs += [("system", path) for path in (cuda_include, python_include) if path]
    return dirs + [("system", path) for path in extra]


def tree_sample(pids, read_status):
    """(sum of VmRSS, {pid: (name, VmHWM)}) over the processes, in bytes; a process gone meanwhile is skipped."""
    total, hwm = 0, {}
    for pid in pids:
        fields = read_status(pid)
        if not fields:
            continue
        total += fields.get("VmRSS", 0)
        hwm[pid] = (fields.get("Name", "?"), fields.get("VmHWM", 0))
    return total, hwm


def parse_status(text):
    """/proc/PID/status: Name and the Vm* sizes (in bytes)."""
    out = {}
    for line in text.splitlines():
        key, _sep, value = line.partition(":")
        value = value.strip()
        if key == "Name":
            out["Name"] = value
        elif key in ("VmRSS", "VmHWM") and value.endswith("kB"):
            out[key] = int(value.split()[0]) * 1024
    return out


def peak_by_tool(hwm_by_pid):
    """{tool name: largest VmHWM of a process of that name} from {pid: (name, hwm)}."""
    out = {}
    for name, hwm in hwm_by_pid.values():
        out[name] = max(out.get(name, 0), hwm)
    return out


def gib(value):
    return round(value / GIB, 2)


def summarise(records):
    """Per source: the per-arch table (one -gencode at a time), the --threads table (all arches) and the model."""
    sources = {}
    for rec in records:
        entry = sources.setdefault(rec["source"], {"per_arch": {}, "all_arches": {}})
        if len(rec["arches"]) == 1 and rec["threads"] == 1:
            entry["per_arch"][rec["arches"][0]] = row(rec)
        elif len(rec["arches"]) > 1:
            entry["all_arches"][str(rec["threads"])] = dict(row(rec), arches=rec["arches"])
    for entry in sources.values():
        entry["model"] = fit_model(entry["per_arch"], entry["all_arches"])
    return sources


def row(rec):
    return {"peak_gib": gib(rec["peak_tree_rss"]), "largest_process_gib": gib(rec["largest_process_hwm"]),
            "cgroup_peak_gib": gib(rec["cgroup_peak"]) if rec.get("cgroup_peak") else None,
            "wall_s": round(rec["wall_s"], 1), "cpu_s": round(rec["cpu_s"], 1), "oom_killed": rec["oom_killed"],
            "rc": rec["rc"], "load_before": rec["load_before"], "by_tool_gib": {k: gib(v) for k, v in rec["by_tool"].items()}}


def fit_model(per_arch, all_arches):
    """peak(threads) against the sum and the max of the per-arch peaks; time(threads) against the sum of the
    per-arch times. Only arches measured alone count; the model is None when either side is missing."""
    if not per_arch or not all_arches:
        return None
    fits = [r for r in per_arch.values() if not r["oom_killed"] and r["rc"] == 0]
    if not fits:
        return None
    peaks = sorted((r["peak_gib"] for r in fits), reverse=True)
    sum_peak, max_peak = round(sum(peaks), 2), peaks[0]
    sum_wall = round(sum(r["wall_s"] for r in fits), 1)
    sum_cpu = round(sum(r["cpu_s"] for r in fits), 1)
    out = {"sum_of_arch_peaks_gib": sum_peak, "max_arch_peak_gib": max_peak, "sum_of_arch_wall_s": sum_wall,
           "sum_of_arch_cpu_s": sum_cpu, "arches_alone": len(fits), "threads": {}}
    for threads, rec in sorted(all_arches.items(), key=lambda kv: int(kv[0])):
        n = int(threads)
        top_n = round(sum(peaks[:n]), 2)
        out["threads"][threads] = {
            "peak_gib": rec["peak_gib"], "over_max_arch": round(rec["peak_gib"] / max_peak, 2),
            "over_sum_of_top_n_arch_peaks": round(rec["peak_gib"] / top_n, 2) if top_n else None,
            "over_threads_x_max": round(rec["peak_gib"] / (n * max_peak), 2),
            "wall_s": rec["wall_s"], "cpu_s": rec["cpu_s"],
            "cpu_over_sum_of_arch_cpu": round(rec["cpu_s"] / sum_cpu, 2) if sum_cpu else None,
            "wall_over_sum_of_arch_wall": round(rec["wall_s"] / sum_wall, 2) if sum_wall else None}
    one = all_arches.get("1")
    if one and len(fits) == len(one["arches"]) > 1:
        out["cpu_split"] = cpu_split(sum_cpu, one["cpu_s"], len(fits))
    return out


def cpu_split(sum_alone, all_at_one_thread, n):
    """CPU of an n-arch compile = shared + n x per_arch (cudafe++, the host compile once; cicc + ptxas per arch),
    solved from the n compiles alone (n x shared + sum per_arch) and the one with all n (shared + sum per_arch)."""
    shared = (sum_alone - all_at_one_thread) / (n - 1)
    return {"shared_s": round(shared, 1), "per_arch_s": round((all_at_one_thread - shared) / n, 1)}


def replay_data(records, note):
    """The file bench/replay.py reads (load_record): one object per source x arch compiled alone at --threads 1,
    named "SOURCE@ARCH", seconds = its CPU seconds (one thread, so what it takes alone on an idle core; the wall
    seconds on this shared machine are kept beside), peak_gib = the tree's sampled peak; an OOM-killed one has
    peak_gib null and oom_at_gib the limit. Multi-arch compiles and the model go under "sources"."""
    objects = []
    for rec in records:
        if len(rec["arches"]) != 1 or rec["threads"] != 1:
            continue
        oom = bool(rec["oom_killed"])
        objects.append({"source": "%s@%s" % (rec["source"], rec["arches"][0]), "arch": rec["arches"][0],
                        "seconds": round(rec["cpu_s"], 1), "wall_s": round(rec["wall_s"], 1),
                        "peak_gib": None if oom else gib(rec["peak_tree_rss"]),
                        "oom_at_gib": gib(rec["limit_bytes"]) if oom else None, "load_before": rec["load_before"][0]})
    return {"note": note, "unit": {"seconds": "CPU s", "wall_s": "s", "peak_gib": "GiB (2^30 bytes)"},
            "objects": [o for o in objects if o["peak_gib"] is not None],
            "oom_killed": [o for o in objects if o["peak_gib"] is None], "sources": summarise(records)}


def markdown(sources):
    lines = []
    for source, entry in sorted(sources.items()):
        lines.append("`%s`, one -gencode at a time, --threads 1:" % source)
        lines.append("")
        lines.append("| arch | peak GiB (tree RSS) | largest process | wall s | CPU s | load before |")
        lines.append("| --- | ---: | --- | ---: | ---: | ---: |")
        for arch, r in entry["per_arch"].items():
            big = max(r["by_tool_gib"].items(), key=lambda kv: kv[1]) if r["by_tool_gib"] else ("-", 0)
            peak = "> limit (OOM)" if r["oom_killed"] else "%.2f" % r["peak_gib"]
            cells = (arch, peak, big[0], big[1], r["wall_s"], r["cpu_s"], r["load_before"][0])
            lines.append("| %s | %s | %s %.2f | %.0f | %.0f | %.1f |" % cells)
        lines.append("")
        if entry["all_arches"]:
            lines.append("| all %d arches | peak GiB | wall s | CPU s | load before |" % len(
                next(iter(entry["all_arches"].values()))["arches"]))
            lines.append("| --- | ---: | ---: | ---: | ---: |")
            for threads, r in sorted(entry["all_arches"].items(), key=lambda kv: int(kv[0])):
                cells = (threads, r["peak_gib"], r["wall_s"], r["cpu_s"], r["load_before"][0])
                lines.append("| --threads %s | %.2f | %.0f | %.0f | %.1f |" % cells)
            lines.append("")
    return "\n".join(lines)


# ---- the impure part: a child cgroup, the compile, the sampler ----

def own_memory_cgroup():
    """(version, path) of this process's memory cgroup, where children can be made."""
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            _hid, controllers, path = line.rstrip("\n").split(":", 2)
            if "memory" in controllers.split(","):
                return 1, "/sys/fs/cgroup/memory" + path
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            if line.startswith("0::"):
                return 2, "/sys/fs/cgroup" + line.rstrip("\n")[3:]
    raise RuntimeError("no memory cgroup found in /proc/self/cgroup")


def write(path, text):
    with open(path, "w") as handle:
        handle.write(text)


def read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ""


def read_status(pid):
    return parse_status(read_text("/proc/%d/status" % pid))


def cgroup_files(version):
    if version == 1:
        return {"limit": "memory.limit_in_bytes", "peak": "memory.max_usage_in_bytes", "procs": "cgroup.procs"}
    return {"limit": "memory.max", "peak": "memory.peak", "procs": "cgroup.procs"}


def oom_kills(version, path):
    name = "memory.oom_control" if version == 1 else "memory.events"
    for line in read_text(os.path.join(path, name)).splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    return 0


def measure(argv, limit_bytes, env=None):
    """Run argv in a fresh child memory cgroup with a hard limit; sample its processes every 0.2 s."""
    version, parent = own_memory_cgroup()
    files = cgroup_files(version)
    cg = os.path.join(parent, "default_build_sample.%d" % os.getpid())
    os.mkdir(cg)
    try:
        write(os.path.join(cg, files["limit"]), str(limit_bytes))
        procs = os.path.join(cg, files["procs"])
        load_before = [round(x, 2) for x in os.getloadavg()]
        start = time.time()
        log = tempfile.TemporaryFile()  # a file, not a pipe: nvcc's diagnostics can outgrow a pipe's buffer
        child = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                 preexec_fn=lambda: write(procs, str(os.getpid())))
        peak, hwm, status = 0, {}, None
        while status is None:
            pids = [int(p) for p in read_text(procs).split()]
            total, seen = tree_sample(pids, read_status)
            peak = max(peak, total)
            for pid, (name, high) in seen.items():
                if high >= hwm.get(pid, ("", 0))[1]:
                    hwm[pid] = (name, high)
            _pid, status_word, usage = os.wait4(child.pid, os.WNOHANG)
            if _pid:
                status = status_word
                break
            time.sleep(SAMPLE_SECONDS)
        wall = time.time() - start
        log.seek(0)
        output = log.read().decode("utf-8", "replace")
        child.returncode = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status
        by_tool = peak_by_tool(hwm)
        return {"rc": child.returncode, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
                "peak_tree_rss": max(peak, max(by_tool.values()) if by_tool else 0),
                "largest_process_hwm": max(by_tool.values()) if by_tool else 0, "by_tool": by_tool,
                "cgroup_peak": int(read_text(os.path.join(cg, files["peak"])).strip() or 0),
                "oom_killed": oom_kills(version, cg) > 0, "limit_bytes": limit_bytes,
                "load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()],
                "sampler": "sum of VmRSS over the cgroup's processes every %.1f s, and each one's VmHWM" % SAMPLE_SECONDS,
                "output_tail": output[-2000:]}
    finally:
        for dummy in range(50):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)


def run(args):
    tree = os.path.abspath(args.tree)
    cmakelists = read_text(os.path.join(tree, "CMakeLists.txt"))
    if not cmakelists:
        raise SystemExit("%s has no CMakeLists.txt: --tree must be the sgl-kernel folder" % tree)
    gencodes = default_gencodes(args.cuda_version, args.machine)
    missing = gencodes_missing_from(cmakelists, gencodes)
    if missing:
        raise SystemExit("the tree's CMakeLists.txt lacks %s: not the sgl-kernel 0.3.19 layout" % ", ".join(missing))
    try:
        chosen = gencodes if args.all_arches else select_gencodes(gencodes, args.arch or [])
    except ValueError as err:
        raise SystemExit(str(err))
    if not chosen:
        raise SystemExit("name at least one --arch, or --all-arches")
    includes = include_dirs(tree, args.cutlass, args.flashinfer, args.torch_include, args.cuda_include,
                            args.python_include, args.extra_include or ())
    workdir = tempfile.mkdtemp(prefix="dbs-", dir=args.workdir)
    obj = os.path.join(workdir, os.path.basename(args.source) + ".o")
    argv = nvcc_argv(args.nvcc, os.path.join(tree, args.source), obj, includes, chosen, args.threads,
                     args.target, args.cuda_version)
    if args.dry_run:
        os.rmdir(workdir)
        print(" ".join(shlex.quote(a) for a in argv))
        return 0
    env = dict(os.environ, TMPDIR=workdir)
    result = measure(argv, int(args.limit_gib * GIB), env=env)
    result.update({"source": args.source, "target": args.target, "arches": [a for a, _f in chosen],
                   "threads": args.threads, "argv": argv, "when": time.strftime("%Y-%m-%dT%H:%M:%S")})
    for name in os.listdir(workdir):
        os.unlink(os.path.join(workdir, name))
    os.rmdir(workdir)
    with open(args.out, "a") as handle:
        handle.write(json.dumps(result, sort_keys=True) + "\n")
    print("%s %s --threads %d: rc %s, peak %.2f GiB (largest %s), cgroup %.2f GiB, wall %.0f s, CPU %.0f s, load %s"
          % (args.source, ",".join(result["arches"]), args.threads, result["rc"], result["peak_tree_rss"] / GIB,
             max(result["by_tool"].items(), key=lambda kv: kv[1]) if result["by_tool"] else "-",
             result["cgroup_peak"] / GIB, result["wall_s"], result["cpu_s"], result["load_before"]))
    if result["rc"] != 0 and not result["oom_killed"]:
        print(result["output_tail"], file=sys.stderr)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="command")
    one = sub.add_parser("run", help="compile one source, measured")
    one.add_argument("--tree", required=True, help="the sgl-kernel folder of the sglang checkout")
    one.add_argument("--cutlass", required=True)
    one.add_argument("--flashinfer", required=True)
    one.add_argument("--torch-include", required=True, help="torch's include/ (site-packages/torch/include)")
    one.add_argument("--cuda-include", default="", help="cuBLAS/cuSPARSE/cuSOLVER headers if the toolkit lacks them")
    one.add_argument("--python-include", default="/usr/include/python3.11")
    one.add_argument("--extra-include", action="append",
                     help="more system include folders, e.g. the two headers torch's CPU wheel does not ship")
    one.add_argument("--source", required=True, help="path inside the tree, e.g. csrc/elementwise/activation.cu")
    one.add_argument("--arch", action="append", help="sm_90a etc.; repeat for several")
    one.add_argument("--all-arches", action="store_true")
    one.add_argument("--threads", type=int, default=1)
    one.add_argument("--target", default="sm100", choices=TARGETS)
    one.add_argument("--cuda-version", default="13.0")
    one.add_argument("--machine", default=os.uname()[4])
    one.add_argument("--nvcc", default="nvcc")
    one.add_argument("--limit-gib", type=float, default=20.0)
    one.add_argument("--workdir", default=None)
    one.add_argument("--out", default="default_build_sample.jsonl")
    one.add_argument("--dry-run", action="store_true")
    summ = sub.add_parser("summarise", help="tables and the model from the raw records")
    summ.add_argument("records")
    summ.add_argument("--json", default=None, help="write the replay data file (bench/replay_data/...)")
    summ.add_argument("--note", default="", help="what, where and how measured, for the data file")
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args)
    if args.command == "summarise":
        with open(args.records) as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        sources = summarise(records)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(replay_data(records, args.note), handle, indent=1, sort_keys=True)
                handle.write("\n")
        print(markdown(sources))
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
