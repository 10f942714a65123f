#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sgl-kernel's DEFAULT build replayed (issue 29 items 3 and 5): what its user runs without our role - nvcc
``--threads=32``, seven ``-gencode``s (sm_80, 89, 90, 90a, 100a, 103a, 120a on CUDA 13 x86), every source compiled
twice (common_ops_sm90_build and common_ops_sm100_build) - under each policy, on the node shapes of bench/replay.py.

A multi-arch compile at t threads (the model, each part marked):
- per (source, arch): seconds and peak from bench/replay_data/default_build_sample.json when it has the pair
  (measured), else ASSUMED equal to the source's SM120 record (the real tree's only measurement: one arch, 1 thread);
- a host part of ``HOST_FRACTION`` of the SM120 seconds (0.6, MEASURED on one source only: the real tree's
  per_tensor_quant_fp8.cu took 70-86 CPU-s per arch alone and 268 CPU-s for all seven at --threads 1, so about 48 s
  of host front end and compile once and 32 s per arch), run once before the archs; the archs run side by side on t threads
  (longest first), so seconds(t) = host + their LPT makespan on t threads; CPU = host + the sum of the archs;
- peak(t) = the sum of the t largest per-arch peaks (t cicc side by side, as measured with nvcc 13.0: the 1-thread
  peak was cudafe++, then 2 and 3 cicc of ~100 MiB each), at least the largest one.
Policies: ninja's default -j (cores + 2), -j20, MAX_JOBS = memory / guess (5, 10 GiB per job), all at --threads=32;
``--threads 1`` under the scheduler; today's first-come admission (--threads=32); the scheduler (longest fit,
pick_next) with its own nvcc threads per source. Printed beside the bound max(CPU / cores, the longest compile at its
best thread count, the memory area at each compile's smallest area / budget).
    python bench/replay_default.py [--per-arch FILE] [--shapes 2x16,32x64,112x449] [--host-fraction 0.6]
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import replay  # noqa: E402 pylint: disable=wrong-import-position
import replay_product  # noqa: E402 pylint: disable=wrong-import-position

_admission_policy = replay_product._admission_policy  # pylint: disable=protected-access
ARCHS = ("sm_80", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_103a", "sm_120a")
BUILDS = ("sm90", "sm100")          # the two extension targets that compile every source
DEFAULT_THREADS = 32
HOST_FRACTION = 0.6
PER_ARCH = os.path.join(HERE, "replay_data", "default_build_sample.json")


class MultiJob(object):
    """One source of the default build: its per-arch (seconds, peak) and host seconds; ``at(t)`` the compile at t."""

    def __init__(self, name, order, host, arches):
        self.name, self.order, self.host, self.arches = name, order, float(host), list(arches)

    def seconds(self, threads):
        lanes = [0.0] * max(1, min(threads, len(self.arches)))
        for seconds in sorted((s for s, _p in self.arches), reverse=True):
            lanes[lanes.index(min(lanes))] += seconds
        return self.host + max(lanes)

    def peak(self, threads):
        return sum(sorted((p for _s, p in self.arches), reverse=True)[:max(1, min(threads, len(self.arches)))])

    def at(self, threads):
        seconds = self.seconds(threads)
        cpu = (self.host + sum(s for s, _p in self.arches)) / seconds
        return replay.Job(self.name, seconds, self.peak(threads), self.order, cpu)


def load_per_arch(path):
    """{(source, arch): (seconds, peak bytes)} from a per-arch table ({"objects": [{source, arch, seconds, peak_gib}]};
    a source may be named "SOURCE@ARCH", as bench/default_build_sample.py writes it): each a whole one-arch compile
    at --threads 1, like the SM120 record's. {} when there is none yet."""
    if not path or not os.path.exists(path):
        return {}
    try:
        with open(path) as handle:
            rows = json.load(handle)["objects"]
        return dict(((r["source"][:-len("@" + r["arch"])] if r["source"].endswith("@" + r["arch"]) else r["source"], r["arch"]),
                     (float(r["seconds"]), float(r["peak_gib"]) * replay.GIB)) for r in rows)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise replay.ReplayError("%s: every object needs source, arch, seconds and peak_gib (%s)" % (path, exc))


def default_build(sm120, per_arch, host_fraction=HOST_FRACTION, archs=ARCHS, builds=BUILDS):
    """The default build's compiles (every source once per build), and how many (source, arch) pairs were measured."""
    jobs, measured = [], 0
    for job in sorted(sm120, key=lambda j: j.order):
        host = host_fraction * job.seconds
        arches = []
        for arch in archs:
            found = per_arch.get((job.name, arch))
            measured += bool(found)     # a measured one-arch compile holds the same host share as the SM120 one
            arches.append((found[0] * (1 - host_fraction), found[1]) if found else (job.seconds - host, job.peak))
        for build in builds:
            jobs.append(MultiJob("%s@%s" % (job.name, build), len(jobs), host, arches))
    return jobs, measured


def lower_bound(jobs, cores, budget):
    """(bound, its name): total CPU / cores, the longest compile at its best thread count, the memory area at each
    compile's smallest area over thread counts / budget."""
    counts = range(1, len(ARCHS) + 1)
    parts = {"cpu": sum(j.host + sum(s for s, _p in j.arches) for j in jobs) / cores,
             "longest": max(min(j.seconds(t) for t in counts) for j in jobs),
             "memory": sum(min(j.peak(t) * j.seconds(t) for t in counts) for j in jobs) / budget}
    name = max(parts, key=parts.get)
    return parts[name], name


class ThreadsFit(replay_product.Launcher):
    """The scheduler with nvcc threads per source: pick_next over the waiting compiles, each with its options (what
    it needs at 1..min(archs, cores) threads: the model's peak x the margin), as the launcher builds them."""
    name = "threads per source"

    def __init__(self, multi):
        replay_product.Launcher.__init__(self)
        self.multi = dict((m.name, m) for m in multi)

    def pick(self, sim):
        waiting = []
        for entry in sim.waiting:
            multi, seconds = self.multi[entry[2].name], sim.known.get(entry[2].name, (None, None))[1]
            options = [int(multi.peak(t) * replay.MARGIN)
                       for t in range(1, min(len(multi.arches), sim.cores) + 1)]
            waiting.append({"bytes": options[0], "options": options, "threads": 1, "seconds": seconds, "learned": True,
                            "since": entry[0], "entry": entry})
        running = [{"bytes": run.reserved, "threads": max(1, int(round(run.job.cpu))), "learned": True} for run in sim.running]
        chosen = _admission_policy.pick_next(waiting, running, sim.budget, sim.cores, replay.MARGIN)
        if chosen is None:
            return None
        entry = chosen["entry"]
        index = sim.waiting.index(entry)
        sim.waiting[index] = (entry[0], entry[1], self.multi[entry[2].name].at(chosen["threads"]))
        return sim.waiting[index], chosen["bytes"]


def knowledge(multi, threads, kind, seed):
    """What the scheduler knows (warm: peaks and times at ``threads``; seeded: times off by the replay's factor)."""
    jobs = [m.at(threads) for m in multi]
    return replay.knowledge(jobs, kind, random.Random(seed))


def rows_for(multi, cores, mem_gib, seed=29):
    """(label, result) of every policy on one node shape."""
    at32 = [m.at(DEFAULT_THREADS) for m in multi]
    at1 = [m.at(1) for m in multi]
    plans = [("ninja default -j%d, --threads=32" % (cores + 2), at32, replay.Fixed(cores + 2), "cold"),
             ("fixed -j20, --threads=32", at32, replay.Fixed(20), "cold")]
    for guess in (5, 10):
        jobs = replay.max_jobs_guess(cores, mem_gib, guess)
        plans.append(("MAX_JOBS = memory / %d GiB (-j%d), --threads=32" % (guess, jobs), at32, replay.Fixed(jobs), "cold"))
    plans.append(("first-come admission (today's role), --threads=32, warm", at32, replay.FirstCome(), "warm"))
    plans.append(("scheduler, --threads 1, warm", at1, replay_product.Launcher(), "warm"))
    results = []
    for label, jobs, policy, kind in plans:
        known = replay.knowledge(jobs, kind, random.Random(seed))
        results.append((label, replay.Sim(jobs, cores, mem_gib, policy, known).run()))
    for kind in ("warm", "seeded"):
        known = knowledge(multi, 1, kind, seed)
        sim = replay.Sim(at1, cores, mem_gib, ThreadsFit(multi), known)
        results.append(("scheduler, nvcc threads per source, %s" % kind, sim.run()))
    return results


def markdown(multi, shapes, measured):
    lines = ["%d compiles (%d sources x %d builds), %d archs each; %d of %d (source, arch) pairs measured, the rest "
             "assumed = SM120; host part %.2f of the SM120 seconds (--host-fraction)" % (
                 len(multi), len(multi) // len(BUILDS), len(BUILDS), len(ARCHS), measured, len(ARCHS) * len(multi) // len(BUILDS),
                 multi[0].host / (multi[0].host + multi[0].arches[-1][0]) if multi else 0),
             "", "| node | policy | makespan | x bound | OOM kills |", "| --- | --- | ---: | ---: | ---: |"]
    for cores, mem_gib in shapes:
        bound, name = lower_bound(multi, cores, mem_gib * replay.GIB - replay.RESERVE)
        lines.append("| **%d cores / %d GiB** | lower bound (%s) | %.0f s | 1.00 | |" % (cores, mem_gib, name, bound))
        for label, result in rows_for(multi, cores, mem_gib):
            span = "failed (%s)" % result["failed"] if result["failed"] else "%.0f s" % result["makespan"]
            ratio = "-" if result["failed"] else "%.2f" % (result["makespan"] / bound)
            lines.append("| | %s | %s | %s | %d |" % (label, span, ratio, result["oom_kills"]))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", default=replay.DEFAULT_RECORD, help="the SM120 record (one arch, 1 thread)")
    parser.add_argument("--per-arch", default=PER_ARCH, help="per (source, arch) seconds and peaks, when measured")
    parser.add_argument("--shapes", default=",".join("%dx%d" % s for s in replay.SHAPES))
    parser.add_argument("--host-fraction", type=float, default=HOST_FRACTION)
    args = parser.parse_args(argv)
    try:
        multi, measured = default_build(replay.load_record(args.record), load_per_arch(args.per_arch), args.host_fraction)
        print(markdown(multi, replay.parse_shapes(args.shapes), measured))
    except (replay.ReplayError, OSError, ValueError) as exc:
        print("replay_default: %s" % exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
