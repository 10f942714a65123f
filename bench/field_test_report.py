#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The record of a field test of the real sgl-kernel tree built through the role (bench/field_test.sh):
per-object times from .ninja_log, per-source peaks from the admission launcher's peaks.json and per compiler process
from field_test_sampler.py's processes.json, OOM kills and attempts from guarded_build's status file, objects done /
total, and - when a wheel is there - its size, ``cuobjdump --list-elf`` of its CUDA libraries, ``ldd`` of the
extension and ``pip install`` of the wheel into a fresh venv. Writes OUT/summary.json and OUT/field-test.md.

    field_test_report.py --build BUILD --venv VENV --out OUT [--wall S] [--rc RC] [--peaks peaks.json]
"""
from __future__ import absolute_import, division, print_function

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

# the launcher's own key rules: a key's path, and which key names an object's source (FetchContent's: offline/...)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plugins", "module_utils", "_build"))
from _admission_policy import path_of  # noqa: E402 pylint: disable=import-error,wrong-import-position
from _timeline import known_source  # noqa: E402 pylint: disable=import-error,wrong-import-position

GI = 1024.0 ** 3


def run(argv, **kwargs):
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False,
                              **kwargs)
    except OSError as exc:
        return 127, "%s: %s" % (argv[0], exc.strerror)
    return proc.returncode, proc.stdout


def cuda_tool(name, venv=None):
    """A CUDA toolkit program: on PATH, beside nvcc, in /usr/local/cuda/bin, or the one triton brings in the build
    venv (a toolkit of nvcc alone has no cuobjdump)."""
    nvcc = shutil.which("nvcc")
    candidates = [shutil.which(name), nvcc and os.path.join(os.path.dirname(os.path.realpath(nvcc)), name),
                  os.path.join("/usr/local/cuda/bin", name)]
    if venv:
        candidates += sorted(glob.glob(os.path.join(venv, "lib", "python*", "site-packages", "triton", "backends",
                                                    "nvidia", "bin", name)))
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    return name


def load(path, default=None):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return default


def ninja_steps(build):
    """[(output, seconds)] of the last build of each output, from every .ninja_log under the build dir."""
    steps = {}
    for log in glob.glob(os.path.join(build, "*", ".ninja_log")):
        with open(log) as handle:
            for line in handle:
                if line.startswith("#"):
                    continue
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 4:
                    steps[parts[3]] = (int(parts[1]) - int(parts[0])) / 1000.0
    return steps


def source_stem(path):
    """The stem of the source a compiler process works on: ``csrc/moe/topk.cu`` -> ``topk``; nvcc's intermediate
    files are named ``tmpxft_<id>_<id>-<n>_<stem>.<phase>`` (``..._moe_topk_sigmoid_kernels.cudafe1.cpp``)."""
    base = os.path.basename(path or "")
    if base.startswith("tmpxft_"):
        base = base.split("_", 3)[-1]
    return base.split(".", 1)[0]


def cuda_objects(build):
    """(done, total) CUDA objects of build.ninja (a .cu.o output that exists is done)."""
    total = done = 0
    for ninja in glob.glob(os.path.join(build, "*", "build.ninja")):
        root = os.path.dirname(ninja)
        with open(ninja) as handle:
            for line in handle:
                if line.startswith("build ") and ".cu.o" in line.split(":", 1)[0] and "CUDA_COMPILER" in line:
                    output = line[6:].split(":", 1)[0].split(" ")[0].replace("$:", ":")
                    total += 1
                    done += os.path.exists(os.path.join(root, output))
    return done, total


def playbook_failure(path):
    """The message of the playbook's last failed task (``fatal: [host]: FAILED! => {... "msg": ...}``), or None: what a
    run refused before building says, so its summary does not read as a build that did nothing."""
    try:
        with open(path) as handle:
            lines = [line for line in handle if line.startswith("fatal: [") and "=> {" in line]
    except (IOError, OSError):
        return None
    if not lines:
        return None
    try:
        return json.loads(lines[-1].split("=> ", 1)[1]).get("msg")
    except ValueError:
        return lines[-1].strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--venv", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--wall", type=int, default=None)
    parser.add_argument("--rc", type=int, default=None)
    parser.add_argument("--peaks", default=os.path.expanduser("~/.cache/gpufleet/admission/peaks.json"))
    parser.add_argument("--processes", default=None)
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    status = load(os.path.join(build, "gpufleet-build.status.json"), {})
    peaks = load(args.peaks, {})
    procs = load(args.processes or os.path.join(args.out, "processes.json"), {"processes": [], "by_name": {}})
    steps = ninja_steps(build)
    done, total = cuda_objects(build)
    attempts = status.get("attempts") or []
    keys = ("attempt", "jobs", "kind", "oom", "oom_kills", "duration", "peak_memory_bytes")
    summary = {"state": status.get("state"), "rc": args.rc, "wall_seconds": args.wall, "cuda_objects_done": done,
               "cuda_objects_total": total, "attempts": [dict((k, a.get(k)) for k in keys) for a in attempts],
               "oom_kills": sum(a.get("oom_kills") or 0 for a in attempts), "memory_limit": status.get("memory_limit_human"),
               "failure": playbook_failure(os.path.join(args.out, "playbook.log")) if args.rc else None}
    # per CUDA object: seconds (ninja) and the launcher's learned peak of its source
    rows = []
    learned = dict((path_of(k).lstrip("/"), v) for k, v in sorted(peaks.items(), reverse=True))   # the first key wins
    for output, seconds in sorted(steps.items(), key=lambda kv: -kv[1]):
        if not output.endswith(".cu.o"):
            continue
        source = output.split(".dir/", 1)[-1][:-2]
        # the launcher's keys are tree:path#flags, the path relative to the tree (csrc/...), offline/<folder>/<path>
        # (a dependency's sources under its offline_dir) or absolute
        peak = learned.get(known_source(source, learned), {})
        by_name = {}
        for proc in procs.get("processes") or []:
            if proc.get("source") and source_stem(proc["source"]) == source_stem(source):
                by_name[proc["name"]] = max(by_name.get(proc["name"], 0), proc["peak_bytes"])
        rows.append({"object": source, "seconds": seconds, "launcher_peak_bytes": peak.get("peak_bytes"), "by_process": by_name})
    summary["objects"] = rows
    wheels = sorted(glob.glob(os.path.join(os.path.dirname(build), "dist", "*.whl")), key=os.path.getmtime)
    lines = []
    if wheels:
        wheel = wheels[-1]
        summary["wheel"] = {"path": wheel, "bytes": os.path.getsize(wheel)}
        unpacked = tempfile.mkdtemp(prefix="gpufleet-field-wheel-")
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(unpacked)
        elf = {}
        cuobjdump = cuda_tool("cuobjdump", args.venv)
        summary["cuobjdump"] = cuobjdump
        for lib in sorted(glob.glob(os.path.join(unpacked, "**", "*.so"), recursive=True)):
            rc, out = run([cuobjdump, "--list-elf", lib])
            if rc == 0 and out.strip():
                elf[os.path.relpath(lib, unpacked)] = sorted(set(part for line in out.splitlines() for part in line.split(".")
                                                                 if part.startswith("sm_") or part.startswith("compute_")))
        summary["cuobjdump_archs"] = elf
        ext = next(iter(sorted(glob.glob(os.path.join(unpacked, "sgl_kernel", "**", "common_ops*.so"), recursive=True))), None)
        if ext:
            summary["ldd"] = run(["ldd", ext])[1].strip().splitlines()
        fresh = tempfile.mkdtemp(prefix="gpufleet-field-venv-")
        run([sys.executable, "-m", "venv", fresh])
        rc, out = run([os.path.join(fresh, "bin", "pip"), "install", "--no-deps", wheel])
        summary["pip_install"] = {"rc": rc, "tail": out.strip().splitlines()[-2:]}
    with open(os.path.join(args.out, "summary.json"), "w") as handle:
        json.dump(summary, handle, indent=1)
    lines.append("state %s, playbook rc %s, wall %ss; CUDA objects %d / %d; attempts %s; OOM kills %d; limit %s" % (
        summary["state"], args.rc, args.wall, done, total, [(a["jobs"], a["kind"]) for a in summary["attempts"]],
        summary["oom_kills"], summary["memory_limit"]))
    if summary["failure"]:
        lines.append("the playbook failed: %s" % summary["failure"])
    lines += ["", "| CUDA object | seconds | launcher peak | cicc | cudafe++ | cc1plus | ptxas |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        lines.append("| %s | %.0f | %s | %s |" % (row["object"], row["seconds"],
                     ("%.2f GiB" % (row["launcher_peak_bytes"] / GI)) if row["launcher_peak_bytes"] else "-",
                     " | ".join(("%.2f GiB" % (row["by_process"][n] / GI)) if row["by_process"].get(n) else "-"
                                for n in ("cicc", "cudafe++", "cc1plus", "ptxas"))))
    if "wheel" in summary:
        lines += ["", "wheel %s: %.1f MiB; pip install into a fresh venv rc %d" % (
            os.path.basename(summary["wheel"]["path"]), summary["wheel"]["bytes"] / 1024.0 ** 2, summary["pip_install"]["rc"])]
        lines += ["cuobjdump --list-elf: " + "; ".join("%s: %s" % (k, " ".join(v)) for k, v in summary["cuobjdump_archs"].items())]
        lines += ["ldd: " + "; ".join(line.strip() for line in summary.get("ldd", []))]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "field-test.md"), "w") as handle:
        handle.write(text)
    print(text)


if __name__ == "__main__":
    main()
