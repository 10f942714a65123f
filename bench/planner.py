#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark 4: the build planner vs hand-picked -j on a memory-hungry build under a memory cap.

The synthetic project tests/projects/hungry stands in for sgl-kernel: each of S "compile" steps holds
M MiB for T seconds.  It runs on a one-node test fleet whose memory cgroup is capped (C MiB), so
an OOM kill is real and counted by the node's cgroup.  Rows:

- ``cmake --build build -j N`` for a sweep of N: wall time, OOM kills, whether it finished;
- auto: ``-j`` from the build_jobs filter fed by node_facts (memory, cpus) gathered on the capped node,
  once with the CPUs lifted (the steps sleep, so CPUs do not bound them: this tests the memory side)
  and once with the node's own CPUs (what a plan on this 2-core machine gives a CPU-bound build);
- guarded_build with no jobs given (it plans the same way, confines the build in a cgroup of the
  budget and backs off on OOM).

Targets: auto (memory plan) within 1.2 x of the fastest -j that did not OOM, and no OOM kill.
Knobs: GPUFLEET_BENCH_CAP_MIB (800), GPUFLEET_BENCH_HOG_MIB (100), GPUFLEET_BENCH_HOG_SECONDS (1),
GPUFLEET_BENCH_STEPS (24), GPUFLEET_BENCH_JOBS (1,2,3,4,6,7,8,12), GPUFLEET_BENCH_REPEAT (3).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import re
import shlex
import shutil
import sys

import benchlib
from benchlib import BenchFailure
from fleetlib import COLLECTIONS_PATH, Fleet, run_adhoc

if COLLECTIONS_PATH not in sys.path:
    sys.path.insert(0, COLLECTIONS_PATH)

from ansible_collections.gpufleet.preflight.plugins.filter.build_jobs import build_jobs  # noqa: E402

PROJECT = os.path.join(benchlib.REPO_ROOT, "tests", "projects", "hungry")
MIB = 1024 ** 2
# The steps sleep instead of computing, so for the memory plan the CPU bound is lifted.
LIFTED_CPUS = 1024
RESERVE = "32MiB"  # ninja, cmake and the shell in the node's cgroup besides the steps
ADHOC_RE = re.compile(r"^\S+ \| ([A-Z]+)(?: \| rc=\d+)? (?:=> |>>\n)(.*)", re.M | re.S)


def adhoc_json(fleet, module, args, label, timeout=900):
    result = run_adhoc("all", fleet.inventory_path, module, args, env={"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.minimal"},
                       timeout=timeout)
    match = ADHOC_RE.search(result.stdout)
    if not match:
        raise BenchFailure("%s: no result (rc %d)\n%s\n%s" % (label, result.rc, benchlib.tail(result.stdout), benchlib.tail(result.stderr)))
    try:
        return match.group(1), json.loads(match.group(2))
    except ValueError:
        raise BenchFailure("%s: unreadable result\n%s" % (label, benchlib.tail(result.stdout)))


class HungryBuild:
    """The synthetic project configured once in the fleet dir; each build starts from no outputs."""

    def __init__(self, fleet, node, hog_mib, hog_seconds, steps):
        self.fleet, self.node, self.steps = fleet, node, steps
        self.source = os.path.join(fleet.dir, "hungry")
        self.build = os.path.join(self.source, "build")
        shutil.copytree(PROJECT, self.source)
        configure = ("cd %s && cmake -S . -B build -G Ninja -DHOG_MIB=%d -DHOG_SECONDS=%s -DHOG_STEPS=%d >build.log 2>&1 && "
                     "cmake --build build --target hog >>build.log 2>&1" % (shlex.quote(self.source), hog_mib, hog_seconds, steps))
        result = node.run(configure, timeout=300)
        if result.rc != 0:
            raise BenchFailure("configuring %s failed:\n%s" % (PROJECT, self.log()))

    def log(self):
        try:
            return benchlib.tail(open(os.path.join(self.source, "build.log")).read(), 30)
        except IOError as exc:
            return str(exc)

    def clean(self):
        for path in glob.glob(os.path.join(self.build, "unit_*.o")):
            os.unlink(path)

    def done(self):
        return len(glob.glob(os.path.join(self.build, "unit_*.o")))

    def run(self, jobs):
        """cmake --build -j jobs in the capped node: (seconds, rc, OOM kills, steps done)."""
        self.clean()
        before = self.node.oom_kill_count()
        cmd = ("cd %s && s=$(date +%%s%%N); cmake --build build -j %d >>build.log 2>&1; rc=$?; e=$(date +%%s%%N); echo $rc $((e - s))"
               % (shlex.quote(self.source), jobs))
        result = self.node.run(cmd, timeout=900)
        try:
            rc, nanos = [int(x) for x in result.stdout.split()]
        except ValueError:
            raise BenchFailure("-j%d: unexpected output %r %r" % (jobs, result.stdout, result.stderr))
        return nanos / 1e9, rc, self.node.oom_kill_count() - before, self.done()


def plan(fleet, cpus, hog_mib):
    status, result = adhoc_json(fleet, "gpufleet.preflight.node_facts", "gather_subset=memory,cpus", "node_facts")
    if status != "SUCCESS":
        raise BenchFailure("node_facts failed: %s" % result.get("msg", result))
    facts = result["ansible_facts"]
    return build_jobs(facts["gpufleet_memory"], cpus=cpus if cpus else facts["gpufleet_cpus"],
                      memory_per_thread="%dMiB" % per_thread_mib(hog_mib), reserve=RESERVE)


def per_thread_mib(hog_mib):
    """What an operator would budget per compile: the step's memory and a 10% margin."""
    return int(hog_mib * 1.1 + 0.5)


def main():
    cap_mib = benchlib.env_int("GPUFLEET_BENCH_CAP_MIB", 800, 400)
    hog_mib = benchlib.env_int("GPUFLEET_BENCH_HOG_MIB", 100, 100)
    hog_seconds = os.environ.get("GPUFLEET_BENCH_HOG_SECONDS", "0.3" if benchlib.QUICK else "1")
    steps = benchlib.env_int("GPUFLEET_BENCH_STEPS", 24, 4)
    sweep = benchlib.env_list("GPUFLEET_BENCH_JOBS", (1, 2, 3, 4, 6, 7, 8, 12), (2, 8))
    repeat = benchlib.env_int("GPUFLEET_BENCH_REPEAT", 3, 1)
    for tool in ("cmake", "ninja", "cc"):
        if shutil.which(tool) is None:
            raise BenchFailure("%s is not installed (the synthetic project needs cmake, ninja and a C compiler)" % tool)
    info = benchlib.machine()
    info["load_average"] = benchlib.wait_for_low_load()
    runs = {}
    plans = {}
    guarded = []
    fleet = Fleet()
    try:
        fleet.start(1)
        node = fleet.nodes[0]
        project = HungryBuild(fleet, node, hog_mib, hog_seconds, steps)
        node.set_memory_limit(cap_mib * MIB)
        plans["memory"] = plan(fleet, LIFTED_CPUS, hog_mib)
        plans["node"] = plan(fleet, None, hog_mib)
        print("plan (CPUs lifted): %s\nplan (node's CPUs): %s" % (plans["memory"]["reason"], plans["node"]["reason"]), flush=True)
        variants = [("-j%d" % jobs, jobs) for jobs in sweep]
        variants.append(("auto", plans["memory"]["jobs"]))
        variants.append(("auto_node_cpus", plans["node"]["jobs"]))
        for round_no in range(repeat):
            for key, jobs in variants:
                seconds, rc, ooms, done = project.run(jobs)
                runs.setdefault(key, []).append({"jobs": jobs, "seconds": seconds, "rc": rc, "oom_kills": ooms, "steps_done": done})
            project.clean()
            before = node.oom_kill_count()
            status, result = adhoc_json(fleet, "gpufleet.preflight.guarded_build", {
                "cmd": "cmake --build build", "chdir": project.source, "name": "bench", "force": True,
                "memory_per_thread": "%dMiB" % per_thread_mib(hog_mib), "reserve": RESERVE, "cpus": LIFTED_CPUS}, "guarded_build")
            if status not in ("SUCCESS", "CHANGED"):
                raise BenchFailure("guarded_build failed: %s\n%s" % (result.get("msg"), "\n".join(result.get("log_tail", []))))
            guarded.append({"seconds": result["duration"], "attempts": [(a["jobs"], a["oom"]) for a in result["attempts"]],
                            "oom_kills": sum(a.get("oom_kills") or 0 for a in result["attempts"]), "node_oom_kills": node.oom_kill_count() - before,
                            "steps_done": project.done(), "memory_limit_bytes": result["memory_limit_bytes"]})
            print("round %d/%d: %s; guarded_build %.1fs %s (load %.2f)" % (
                round_no + 1, repeat, ", ".join("%s %s" % (k, "%.1fs" % runs[k][-1]["seconds"] if runs[k][-1]["rc"] == 0 else "OOM")
                                                for k, _j in variants),
                guarded[-1]["seconds"], guarded[-1]["attempts"], os.getloadavg()[0]), flush=True)
    finally:
        fleet.stop()

    def summary(key):
        entries = runs[key]
        finished = [e for e in entries if e["rc"] == 0 and e["steps_done"] == steps]
        return {"jobs": entries[0]["jobs"], "median": benchlib.median([e["seconds"] for e in entries]),
                "ooms": sum(e["oom_kills"] for e in entries), "finished": len(finished), "runs": len(entries)}

    sums = dict((key, summary(key)) for key in runs)
    safe = [key for key in ("-j%d" % j for j in sweep) if sums[key]["ooms"] == 0 and sums[key]["finished"] == sums[key]["runs"]]
    best = min(safe, key=lambda k: sums[k]["median"]) if safe else None
    rows = []
    for key in ["-j%d" % j for j in sweep] + ["auto", "auto_node_cpus"]:
        entry = sums[key]
        label = {"auto": "auto: build_jobs, memory plan (CPUs lifted) -> -j%d" % entry["jobs"],
                 "auto_node_cpus": "auto: build_jobs with the node's %d CPUs -> -j%d" % (plans["node"]["cpus"], entry["jobs"])}.get(
                     key, "`cmake --build build %s`" % key)
        ratio = entry["median"] / sums[best]["median"] if best else None
        rows.append([label, benchlib.fmt_seconds(entry["median"]), entry["ooms"], "%d/%d" % (entry["finished"], entry["runs"]),
                     benchlib.fmt_ratio(ratio) if entry["finished"] == entry["runs"] else "-"])
    g_median = benchlib.median([g["seconds"] for g in guarded])
    rows.append(["guarded_build, planned itself (CPUs lifted): attempts (jobs, oom) %s" % guarded[0]["attempts"],
                 benchlib.fmt_seconds(g_median), sum(g["node_oom_kills"] for g in guarded),
                 "%d/%d" % (sum(1 for g in guarded if g["steps_done"] == steps), len(guarded)),
                 benchlib.fmt_ratio(g_median / sums[best]["median"]) if best else "-"])
    table = benchlib.markdown_table(["%d steps x %d MiB x %ss under a %d MiB cap" % (steps, hog_mib, hog_seconds, cap_mib), "median s",
                                     "OOM kills (all runs)", "finished", "vs fastest safe -j"], rows)
    auto = sums["auto"]
    targets = [("auto-planned build has no OOM kill", auto["ooms"] == 0 and auto["finished"] == auto["runs"],
                "%d OOM kills, %d/%d finished" % (auto["ooms"], auto["finished"], auto["runs"]), True)]
    if best:
        ratio = auto["median"] / sums[best]["median"]
        targets.append(("auto within 1.2x of the fastest -j that did not OOM (%s)" % best, ratio <= 1.2,
                        "%.2fx: -j%d %.1fs vs %s %.1fs" % (ratio, auto["jobs"], auto["median"], best, sums[best]["median"])))
    notes = ["plans: %s; %s" % (plans["memory"]["reason"], plans["node"]["reason"]),
             "memory per step budgeted at %d MiB (the step's %d MiB + 10%%), reserve %s for ninja/cmake/shell; available "
             "memory is what node_facts reads in the capped node cgroup" % (per_thread_mib(hog_mib), hog_mib, RESERVE),
             "the synthetic steps sleep, so more jobs than CPUs still run faster here; a real nvcc compile is CPU-bound, "
             "which is why the planner also caps jobs at the CPUs (the 'node's CPUs' row)",
             "medians over %d runs; OOM kills counted by the node cgroup's oom_kill counter" % repeat]
    code = benchlib.report("planner", "Planned -j vs a fixed -j sweep under a %d MiB cap" % cap_mib, info, table, notes,
                           {"cap_mib": cap_mib, "hog_mib": hog_mib, "hog_seconds": hog_seconds, "steps": steps, "runs": runs,
                            "plans": plans, "guarded_build": guarded, "best_safe": best}, targets)
    if auto["ooms"] or auto["finished"] != auto["runs"]:
        raise BenchFailure("the auto-planned build was OOM-killed or did not finish: %s" % runs["auto"])
    if any(g["steps_done"] != steps for g in guarded):
        raise BenchFailure("guarded_build did not finish every step: %s" % guarded)
    return code


if __name__ == "__main__":
    benchlib.main_wrapper(main)
