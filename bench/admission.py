#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: memory admitted per compile (plugins/module_utils/_build/_admission.py) against a fixed -j (issue 17 item 2).

The stand-in tests/projects/standin_mixed_memory has sources of very different memory - two heavy ones (300 MiB for
3 s each, first in the build order) and ten light ones (40 MiB for 1.5 s) - compiled through hogcc.py, under
guarded_build in a real memory cgroup of CAP MiB (500: one heavy source beside light ones fits, two heavy ones do
not). Rows: fixed -j N (guarded_build backs off on each OOM kill), and the admission launcher at -j JOBS, cold (every
source gets the default) and warm (the peaks learned by the cold run). Makespan = guarded_build's duration (all
attempts), OOM kills = what the build cgroup counted. Run as root from the repository root after `make setup`:
    python bench/admission.py            (GPUFLEET_BENCH_CAP_MIB=500, GPUFLEET_BENCH_JOBS=1,2,4, GPUFLEET_BENCH_REPEAT=2)
    GPUFLEET_BENCH_PROJECT=duration python bench/admission.py    (issue 29: memory and duration mixed, CPUs burnt)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import statistics
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "build"))
from test_admission import ADMISSION, admission_config, build_mix, configure_mix, oom_kills  # noqa: E402 pylint: disable=wrong-import-position

import re  # noqa: E402 pylint: disable=wrong-import-position,wrong-import-order
import subprocess  # noqa: E402 pylint: disable=wrong-import-position,wrong-import-order

DURATION = os.path.join(REPO, "tests", "projects", "standin_mixed_duration")
BEFORE = "6f1df83"   # the first-come launcher of issue 17 ("today's admission"), from git


def row(label, results):
    spans = [r.get("duration") or sum(a.get("duration") or 0 for a in r.get("attempts") or []) for r in results]
    return {"mode": label, "makespan_s": round(statistics.median(spans), 1), "runs": [round(s, 1) for s in spans],
            "oom_kills": [oom_kills(r) for r in results], "attempts": [len(r["attempts"]) for r in results],
            "finished": [not r["failed"] for r in results]}


def main():
    cap = int(os.environ.get("GPUFLEET_BENCH_CAP_MIB", "500"))
    fixed_jobs = [int(j) for j in os.environ.get("GPUFLEET_BENCH_JOBS", "1,2,4").split(",")]
    admitted_jobs = max(fixed_jobs)
    repeat = int(os.environ.get("GPUFLEET_BENCH_REPEAT", "2"))
    work = tempfile.mkdtemp(prefix="gpufleet-bench-admission-")
    rows = []
    try:
        for jobs in fixed_jobs:
            results = []
            for index in range(repeat):
                build = os.path.join(work, "fixed-%d-%d" % (jobs, index))
                configure_mix(build)
                results.append(build_mix(build, "bench-fixed", jobs, cap))
            rows.append(row("fixed -j%d" % jobs, results))
        cold, warm = [], []
        for index in range(repeat):
            state = os.path.join(work, "admit-%d" % index)
            os.makedirs(state)
            peaks = os.path.join(state, "peaks.json")
            for phase, results in (("cold", cold), ("warm", warm)):
                build = os.path.join(state, phase)
                configure_mix(build, admission_config(state, peaks))
                results.append(build_mix(build, "bench-admit", admitted_jobs, cap))
        rows.append(row("admission -j%d, cold (default 100 MiB per unknown source)" % admitted_jobs, cold))
        rows.append(row("admission -j%d, warm (learned peaks)" % admitted_jobs, warm))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"cap_mib": cap, "cpus": os.cpu_count(), "rows": rows}, indent=1))
    print("\n| mode | makespan (median) | runs | OOM kills | attempts |\n| --- | ---: | --- | --- | --- |")
    for r in rows:
        print("| %s | %.1f s | %s | %s | %s |" % (r["mode"], r["makespan_s"], r["runs"], r["oom_kills"], r["attempts"]))


def lower_bound(project, cpus, budget_mib):
    """max(CPU-seconds / cores, longest compile, memory-area / budget) of the stand-in's declared hogs."""
    hogs = []
    for name in os.listdir(os.path.join(project, "src")):
        with open(os.path.join(project, "src", name)) as handle:
            mib, seconds = re.search(r"gpufleet-hog:\s*([0-9.]+)\s+([0-9.]+)", handle.read()).groups()
        hogs.append((float(mib), float(seconds)))
    return max(sum(s for m, s in hogs) / cpus, max(s for m, s in hogs), sum(m * s for m, s in hogs) / budget_mib)


def duration_bench():
    """Issue 29: standin_mixed_duration (long-heavy last, short-heavy, long-light, many light), CPUs burnt
    (HOGCC_BURN=1), a 600 MiB cgroup: fixed -j, the first-come launcher before issue 29 (warm, at -j = cores, as the
    role ran it) and the scheduler with ninja wide (-j16), cold and warm."""
    os.environ["HOGCC_BURN"] = "1"
    cap, cpus, reserve = int(os.environ.get("GPUFLEET_BENCH_CAP_MIB", "600")), os.cpu_count(), 16
    work = tempfile.mkdtemp(prefix="gpufleet-bench-duration-")
    rows = []
    try:
        before = os.path.join(work, "before_admit.py")
        with open(before, "w") as handle:
            handle.write(subprocess.check_output(["git", "-C", REPO, "show", BEFORE + ":plugins/module_utils/_build/_admission.py"],
                                                 universal_newlines=True))
        for jobs in (1, cpus, 2 * cpus):
            build = os.path.join(work, "fixed-%d" % jobs)
            configure_mix(build, project=DURATION)
            rows.append(row("fixed -j%d" % jobs, [build_mix(build, "bench-fixed", jobs, cap)]))
        for label, launcher, jobs in (("first-come admission (before issue 29) -j%d" % cpus, before, cpus),
                                      ("scheduler -j16 (ninja wide, cpus %d)" % cpus, None, 16)):
            state = os.path.join(work, "state-%d" % len(rows))
            os.makedirs(state)
            peaks = os.path.join(state, "peaks.json")
            for phase in ("cold", "warm"):
                build = os.path.join(state, phase)
                config = admission_config(state, peaks, root=DURATION, reserve_mib=reserve) if launcher else \
                    admission_config(state, peaks, root=DURATION, reserve_mib=reserve, cpus=cpus)
                configure_mix(build, config, project=DURATION, admission=launcher or ADMISSION)
                rows.append(row("%s, %s" % (label, phase), [build_mix(build, "bench-admit", jobs, cap)]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bound = lower_bound(DURATION, cpus, cap - reserve)
    print(json.dumps({"cap_mib": cap, "cpus": cpus, "lower_bound_s": round(bound, 1), "rows": rows}, indent=1))
    print("\n| mode | makespan | x bound | OOM kills | attempts |\n| --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        cells = (r["mode"], r["makespan_s"], r["makespan_s"] / bound, r["oom_kills"][0], r["attempts"][0])
        print("| %s | %.1f s | %.2f | %s | %s |" % cells)


if __name__ == "__main__":
    if os.environ.get("GPUFLEET_BENCH_PROJECT") == "duration":
        duration_bench()
    else:
        main()
