#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Replay a recorded build under each compile-scheduling policy on node shapes (issue 29 item 5).

A record is a list of compiles - seconds alone on one core, memory peak - read from a data file
(bench/replay_data/sgl_kernel_sm120.json: the real tree's 76 SM120 objects) or from a build directory's `.ninja_log`
(v5/v6: start, end, mtime, output, hash in ms) plus the admission launcher's peaks.json. The model: processor sharing
on the cores (n running compiles of CPU share f each progress at min(1, cores / sum f)), each compile's memory grows
linearly to its peak over the first half of its duration and stays there; when the sum of what the running compiles
hold passes the node's memory the OOM killer takes the one holding most (as the kernel's oom_score does: cicc's RSS
dominates), and the compile is retried. Policies (each a small class below):

- ``fixed -jN``: ninja alone; an OOM kill fails the step, ninja drains, guarded_build resumes at half the -j;
- ``MAX_JOBS=budget/guess``: the per-job guess sglang and flash-attention use (5 GiB), then as fixed;
- ``first-come``: today's launcher (plugins/module_utils/_build/_admission.py ``decide``): ninja -j = cores, so a
  waiting launcher holds a ninja slot; first come first served with backfilling that does not delay the head;
  reservation = learned peak x margin (unknown: the 5 GiB default), grown to what the compile holds x margin;
- ``longest-fit``: ninja wide, the launcher caps running compiles at the cores and starts the waiting compile with the
  longest expected time that fits the memory left (learned peaks x the margin, the margin counted once, for the
  largest: _admission_policy.load); an unknown source (cold) takes all the room left, and only starts beside no
  other unknown one, until it has shown its peak.

Knowledge: ``warm`` (this node's own peaks and times), ``seeded`` (peaks from another node, times off by a
log-normal factor), ``fleet`` (the fleet's merge of three such nodes: the median time),
``cold`` (nothing known; learned as the build goes). Lower bound of a build =
max(total CPU / cores, longest compile, sum(peak x seconds) / budget); budget = memory less the 0.5 GiB reserve.
    python bench/replay.py [--record FILE | --ninja-log BUILD --peaks peaks.json] [--shapes 2x16,32x64] [--orders N]
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the records (split off for the 500-line rule): re-exported, replay.Job and replay.load_record stay as they were
from replay_records import GIB, GROWTH, Job, ReplayError  # noqa: E402,F401 pylint: disable=wrong-import-position,unused-import
from replay_records import jobs_from_build, load_record, parse_ninja_log  # noqa: E402 pylint: disable=wrong-import-position

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RECORD = os.path.join(HERE, "replay_data", "sgl_kernel_sm120.json")
SHAPES = ((2, 16), (32, 64), (112, 449))  # (cores, GiB)
RESERVE = 0.5 * GIB   # what ninja, cmake, pip and the page cache keep (the launcher's reserve_bytes)
MARGIN = 1.15         # the launcher's margin on a learned peak
DEFAULT_BYTES = 5 * GIB
MAX_KILLS = 4         # a source killed this often fails the build (guarded_build's attempts)
EPS = 1e-9


def lower_bound(jobs, cores, budget, margin=1.0):
    """(binding bound, its name) = max(total CPU / cores, longest compile, sum(peak x margin x seconds) / budget);
    margin 1.15: the bound of a launcher that reserves each compile's peak x its margin for the whole compile."""
    parts = {"cpu": sum(j.seconds * j.cpu for j in jobs) / cores, "longest": max(j.seconds for j in jobs),
             "memory": sum(j.peak * margin * j.seconds for j in jobs) / budget}
    name = max(parts, key=parts.get)
    return parts[name], name


def knowledge(jobs, kind, rng=None, spread=0.3):
    """What the scheduler knows before the build: {name: (peak, seconds)}. ``seeded``: one other node's times, each off
    by a log-normal factor; ``fleet``: the fleet's merge of three such nodes (merge_admission_peaks keeps the median
    time of the nodes that finished a source)."""
    if kind == "cold":
        return {}
    if kind == "warm":
        return dict((j.name, (j.peak, j.seconds)) for j in jobs)
    rng = rng or random.Random(29)
    if kind == "fleet":
        return dict((j.name, (j.peak, sorted(j.seconds * math.exp(rng.gauss(0, spread)) for _node in range(3))[1]))
                    for j in jobs)
    return dict((j.name, (j.peak, j.seconds * math.exp(rng.gauss(0, spread)))) for j in jobs)


# -- the model -------------------------------------------------------------------------------------------------------
class Run:
    def __init__(self, job, now, reserved, since):
        self.job, self.work, self.started, self.reserved, self.since = job, 0.0, now, reserved, since

    def memory(self):
        return self.job.peak * min(1.0, self.work / (self.job.grow * self.job.seconds))

    def growing(self):
        return self.work < self.job.grow * self.job.seconds - EPS


class Sim:
    """One build on one node shape under one policy: advance from event to event (a start, a compile reaching its
    peak, a finish, the memory reaching the limit)."""

    def __init__(self, jobs, cores, mem_gib, policy, known, order=None, reserve=RESERVE, background=0.0):
        self.cores, self.limit, self.policy, self.background = cores, mem_gib * GIB, policy, background
        self.budget = self.limit - reserve
        self.pending = list(order if order is not None else sorted(jobs, key=lambda j: j.order))  # ninja's order
        self.waiting, self.running = [], []    # launched by ninja: waiting in the launcher / compiling
        self.known = dict(known)
        self.now, self.oom_kills, self.kills, self.draining, self.failed, self.seq = 0.0, 0, {}, False, None, 0
        self.jobs = policy.ninja_jobs(self)
        self.trace = []     # (time, "start" | "end" | "oom", source): what a test or a reader checks the policy by

    def rate(self):
        """Processor sharing: the running compiles' CPU shares plus the neighbours' runnable processes on the cores."""
        demand = sum(r.job.cpu for r in self.running)
        return min(1.0, self.cores / (demand + self.background)) if demand > 0 else 1.0

    def launch(self):
        if self.draining and not self.running and not self.waiting:
            self.draining = False   # guarded_build's next attempt
        while not self.draining and self.pending and len(self.waiting) + len(self.running) < self.jobs:
            self.waiting.append((self.seq, self.now, self.pending.pop(0)))
            self.seq += 1

    def start(self, entry, reserved):
        self.waiting.remove(entry)
        self.running.append(Run(entry[2], self.now, reserved, entry[1]))
        self.trace.append((self.now, "start", entry[2].name))

    def step(self):
        rate = self.rate()
        dt, oom = float("inf"), False
        for run in self.running:
            dt = min(dt, (run.job.seconds - run.work) / rate)
            if run.growing():
                dt = min(dt, (run.job.grow * run.job.seconds - run.work) / rate)
        held = sum(r.memory() for r in self.running)
        slope = sum(r.job.peak * rate / (r.job.grow * r.job.seconds) for r in self.running if r.growing())
        if slope > 0 and (self.limit - held) / slope < dt - EPS:
            dt, oom = max((self.limit - held) / slope, 0.0), True
        self.now += dt
        for run in self.running:
            run.work = min(run.job.seconds, run.work + rate * dt)
            run.reserved = self.policy.grown(run)
        if oom:
            self.kill(max(self.running, key=lambda r: (r.memory(), r.started)))
        for run in [r for r in self.running if r.work >= r.job.seconds - EPS]:
            self.running.remove(run)
            self.known[run.job.name] = (run.job.peak, run.job.seconds)
            self.trace.append((self.now, "end", run.job.name))

    def kill(self, run):
        self.running.remove(run)
        self.trace.append((self.now, "oom", run.job.name))
        self.oom_kills += 1
        name = run.job.name
        self.kills[name] = self.kills.get(name, 0) + 1
        if self.kills[name] >= MAX_KILLS:
            self.failed = "%s killed %d times" % (name, self.kills[name])
        before = self.known.get(name, (0.0, None))
        self.known[name] = (max(before[0] or 0.0, run.memory()), before[1])   # the partial peak, as _admission.record keeps
        self.policy.on_oom(self, run)

    def run(self, max_events=200000):
        for dummy in range(max_events):
            self.launch()
            self.policy.admit(self)
            if self.failed or not (self.running or self.waiting or self.pending):
                break
            if not self.running:
                raise ReplayError("policy %s started nothing with %d compiles waiting" % (self.policy.name, len(self.waiting)))
            self.step()
        else:
            raise ReplayError("policy %s: no end after %d events (at %.0f s)" % (self.policy.name, max_events, self.now))
        return {"makespan": float("inf") if self.failed else self.now, "oom_kills": self.oom_kills, "failed": self.failed,
                "final_jobs": self.jobs}


# -- policies --------------------------------------------------------------------------------------------------------
class Fixed:
    """ninja -jN, no launcher; guarded_build's back-off halves -j after an OOM kill (ninja drains first)."""

    def __init__(self, jobs, label=None):
        self.fixed, self.name = jobs, label or "fixed -j%d" % jobs

    def ninja_jobs(self, sim):
        return self.fixed

    def grown(self, run):
        return run.reserved

    def admit(self, sim):
        for entry in list(sim.waiting):
            sim.start(entry, 0.0)

    def on_oom(self, sim, run):
        sim.pending.insert(0, run.job)   # the failed step is the first the resumed ninja runs again
        if not sim.draining:             # one back-off per attempt, however many compiles that attempt lost
            sim.jobs, sim.draining = max(1, sim.jobs // 2), True


def max_jobs_guess(cores, mem_gib, guess_gib):
    """MAX_JOBS as sglang/flash-attention size it: the memory divided by one guessed number per job, at most the cores."""
    return max(1, min(cores, int((mem_gib * GIB - RESERVE) // (guess_gib * GIB))))


class Admission:
    """What the launcher reserves: learned peak x margin, else the default; a running compile's reservation grows to
    what it holds x margin. A need larger than the budget is the whole budget (it runs alone)."""
    name = "admission"

    def need(self, sim, job):
        peak = sim.known.get(job.name, (None, None))[0]
        return min(peak * MARGIN if peak else DEFAULT_BYTES, sim.budget)

    def grown(self, run):
        return max(run.reserved, run.memory() * MARGIN)

    @staticmethod
    def used(sim):
        return sum(r.reserved for r in sim.running)


class FirstCome(Admission):
    """Today's launcher (_admission.decide): ninja -j = cores, first come first served, backfill that does not delay
    the head (by learned seconds); an OOM kill fails the step and guarded_build halves -j."""
    name = "first-come"

    def ninja_jobs(self, sim):
        return sim.cores

    def expected(self, sim, job):
        return sim.known.get(job.name, (None, None))[1]

    def admit(self, sim):
        for entry in sorted(sim.waiting):
            if self.decide(sim, entry):
                sim.start(entry, self.need(sim, entry[2]))

    def decide(self, sim, entry):
        need, used = self.need(sim, entry[2]), self.used(sim)
        fits = used + need <= sim.budget + EPS or not sim.running
        earlier = [e for e in sorted(sim.waiting) if e[0] < entry[0]]
        if not earlier or not fits:
            return fits
        head_need, room = self.need(sim, earlier[0][2]), sim.budget - used
        if room >= head_need:
            shadow, spare = sim.now, room - head_need
        else:
            shadow, spare = float("inf"), 0.0
            ends = sorted((r.started + self.expected(sim, r.job) if self.expected(sim, r.job) else float("inf"), r.reserved)
                          for r in sim.running)
            for end, size in ends:
                room += size
                if room >= head_need:
                    shadow, spare = end, room - head_need
                    break
        mine = self.expected(sim, entry[2])
        if mine and sim.now + mine <= shadow:
            return True
        return need <= spare + EPS

    def on_oom(self, sim, run):
        Fixed.on_oom(self, sim, run)


class LongestFit(Admission):
    """The new scheduler: ninja wide, the launcher runs at most `cores` compiles and starts the waiting one with the
    longest expected time that fits (unknown sources first: they teach the most). An unknown source reserves, by
    ``explore``: "default" the 5 GiB default; "alone" all the room left until it has shown its peak, beside no other
    unknown one and only in room for the largest peak seen; "heaviest" as much as the heaviest source seen so far (at
    least the default; the first, nothing seen, alone). An OOM kill is retried by the launcher, its partial peak
    learned."""
    name = "longest-fit"

    def __init__(self, explore="alone"):
        self.explore = explore

    def ninja_jobs(self, sim):
        return len(sim.pending) + 1

    def grown(self, run):
        if getattr(run, "unknown", False):
            if run.growing():
                return run.reserved
            run.unknown = False     # it has shown its peak: hold that from now on
            return run.memory() * MARGIN
        return Admission.grown(self, run)

    def admit(self, sim):
        while len(sim.running) < sim.cores and sim.waiting:
            picked = self.pick(sim)
            if picked is None:
                return
            entry, need = picked
            sim.start(entry, need)
            sim.running[-1].unknown = self.explore == "alone" and entry[2].name not in sim.known

    def unknown_need(self, sim, room):
        """What an unknown source reserves if it may start now, else None."""
        heaviest = max([p for p, dummy in sim.known.values() if p] + [r.memory() for r in sim.running] + [0.0]) * MARGIN
        if self.explore == "default":
            need = DEFAULT_BYTES
        elif self.explore == "alone":
            if any(getattr(r, "unknown", False) for r in sim.running) or (sim.running and room < max(DEFAULT_BYTES, heaviest)):
                return None
            return room
        else:
            need = min(sim.budget, max(DEFAULT_BYTES, heaviest)) if heaviest else sim.budget
        return need if need <= room + EPS or not sim.running else None

    @staticmethod
    def load(sim, extra=()):
        """What the running compiles (and ``extra`` (bytes, learned) pairs) take for admission, as the launcher's
        ``_admission_policy.load`` counts it: learned peaks x the margin, the margin kept once (for the largest)."""
        pairs = [(r.reserved, r.job.name in sim.known) for r in sim.running] + list(extra)
        learned = [size / MARGIN for size, known in pairs if known]
        return sum(size for size, known in pairs if not known) + sum(learned) + (max(learned) * (MARGIN - 1) if learned else 0)

    def pick(self, sim):
        """(the waiting compile to start now, what it reserves), or None: the longest expected that fits."""
        room = sim.budget - self.load(sim)
        best = None
        for entry in sim.waiting:
            job = entry[2]
            peak, seconds = sim.known.get(job.name, (None, None))
            if peak:
                need, key = self.need(sim, job), (seconds or 0.0, -entry[0])
                if self.load(sim, [(need, True)]) > sim.budget + EPS and sim.running:
                    continue
            else:
                need, key = self.unknown_need(sim, room), (float("inf"), -entry[0])
                if need is None:
                    continue
            if best is None or key > best[0]:
                best = (key, entry, need)
        return best and best[1:]

    def on_oom(self, sim, run):
        sim.waiting.append((sim.seq, sim.now, run.job))
        sim.seq += 1


# -- the replay ------------------------------------------------------------------------------------------------------
def replay(jobs, cores, mem_gib, policy, known_kind="warm", order=None, rng=None):
    """One simulated build: {"makespan", "oom_kills", "failed", "final_jobs"}."""
    return Sim(jobs, cores, mem_gib, policy, knowledge(jobs, known_kind, rng), order).run()


def policies(cores, mem_gib, sweep=(1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 112)):
    """(label, policy factory, knowledge) for one node shape, in the order of the table."""
    rows = [("fixed -j%d" % j, (lambda j=j: Fixed(j)), "cold") for j in sweep if j <= cores]
    guess = max_jobs_guess(cores, mem_gib, 5)
    rows.append(("MAX_JOBS = memory / 5 GiB (-j%d)" % guess, lambda: Fixed(guess, "MAX_JOBS"), "cold"))
    for kind in ("cold", "warm"):
        rows.append(("first-come admission, ninja -j%d, %s" % (cores, kind), FirstCome, kind))
    rows.append(("longest-fit, ninja wide, cold, unknown at the 5 GiB default", lambda: LongestFit("default"), "cold"))
    rows.append(("longest-fit, ninja wide, cold, unknown alone until seen", LongestFit, "cold"))
    rows.append(("longest-fit, ninja wide, cold, unknown as the heaviest seen", lambda: LongestFit("heaviest"), "cold"))
    for kind in ("seeded", "warm"):
        rows.append(("longest-fit, ninja wide, %s" % kind, LongestFit, kind))
    return rows


def table(jobs, shapes, orders=0, seed=29):
    """Every policy on every shape: manifest order, then `orders` shuffled ninja orders (OOM-ing orders counted)."""
    results = []
    for cores, mem_gib in shapes:
        bound, binding = lower_bound(jobs, cores, mem_gib * GIB - RESERVE)
        reserved_bound = lower_bound(jobs, cores, mem_gib * GIB - RESERVE, MARGIN)[0]
        for label, make, kind in policies(cores, mem_gib):
            rng = random.Random(seed)
            base = replay(jobs, cores, mem_gib, make(), kind, rng=random.Random(seed))
            shuffled = []
            for dummy in range(orders):
                order = sorted(jobs, key=lambda j: j.order)
                rng.shuffle(order)
                shuffled.append(replay(jobs, cores, mem_gib, make(), kind, order, random.Random(seed)))
            results.append({"cores": cores, "memory_gib": mem_gib, "policy": label, "bound_s": bound, "binding": binding,
                            "reserved_bound_s": reserved_bound,
                            "makespan_s": base["makespan"], "ratio": base["makespan"] / bound,
                            "ratio_reserved": base["makespan"] / reserved_bound, "oom_kills": base["oom_kills"],
                            "failed": base["failed"], "orders": orders,
                            "orders_oom": sum(1 for r in shuffled if r["oom_kills"]),
                            "orders_worst_ratio": max([r["makespan"] / bound for r in shuffled] or [float("nan")])})
    return results


def markdown(results):
    lines = ["| node | policy | makespan | x bound | x bound at margin | OOM kills | shuffled orders with an OOM "
             "| worst x bound |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    shape = None
    for r in results:
        node = "%d cores / %d GiB" % (r["cores"], r["memory_gib"])
        if node != shape:
            shape = node
            lines.append("| **%s** | lower bound (%s; at the %.2f margin %.0f s) | %.0f s | 1.00 | 1.00 | | | |" % (
                node, r["binding"], MARGIN, r["reserved_bound_s"], r["bound_s"]))
        span = "failed (%s)" % r["failed"] if r["failed"] else "%.0f s" % r["makespan_s"]
        ratio = "-" if r["failed"] else "%.2f" % r["ratio"]
        ratio_reserved = "-" if r["failed"] else "%.2f" % r["ratio_reserved"]
        lines.append("| %s | %s | %s | %s | %s | %d | %s | %s |" % (
            "", r["policy"], span, ratio, ratio_reserved, r["oom_kills"], "%d / %d" % (r["orders_oom"], r["orders"]) if r["orders"] else "-",
            "%.2f" % r["orders_worst_ratio"] if r["orders"] and math.isfinite(r["orders_worst_ratio"]) else "-"))
    return "\n".join(lines)


def parse_shapes(text):
    try:
        return [tuple(int(x) for x in part.lower().split("x")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ReplayError("--shapes: give CORESxGIB, comma separated (e.g. 2x16,32x64), got %r" % text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", default=DEFAULT_RECORD, help="data file (default: the real tree's SM120 record)")
    parser.add_argument("--ninja-log", help="a build directory's .ninja_log (with --peaks) instead of --record")
    parser.add_argument("--peaks", help="the admission launcher's peaks.json for --ninja-log")
    parser.add_argument("--shapes", default=",".join("%dx%d" % s for s in SHAPES), help="CORESxGIB,...")
    parser.add_argument("--orders", type=int, default=20, help="shuffled ninja orders per row (0: manifest order only)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    parser.add_argument("--no-results", action="store_true", help="write nothing under bench/results (full mode does)")
    args = parser.parse_args(argv)
    quick = os.environ.get("GPUFLEET_BENCH_QUICK", "") not in ("", "0", "false", "no")
    try:
        if args.ninja_log:
            if not args.peaks:
                raise ReplayError("--ninja-log needs --peaks (the launcher's peaks.json)")
            with open(args.ninja_log) as handle:
                log = parse_ninja_log(handle.read())
            with open(args.peaks) as handle:
                jobs = jobs_from_build(log, json.load(handle))
        else:
            jobs = load_record(args.record)
        results = table(jobs, parse_shapes(args.shapes), 2 if quick else args.orders)
    except (ReplayError, OSError, ValueError) as exc:
        print("replay: %s" % exc, file=sys.stderr)
        return 2
    print("%d compiles, %.0f CPU-s, longest %.0f s, peaks sum to %.1f GiB" % (
        len(jobs), sum(j.seconds for j in jobs), max(j.seconds for j in jobs), sum(j.peak for j in jobs) / GIB))
    broken = [r for r in results if r["policy"].startswith("longest-fit") and r["policy"].endswith(("seeded", "warm"))
              and (r["oom_kills"] or r["failed"])]
    text = markdown(results)
    print(text)
    if args.json:
        print(json.dumps(results, indent=1))
    if not quick and not args.no_results:
        sys.path.insert(0, HERE)
        import benchlib  # pylint: disable=import-outside-toplevel
        where = benchlib.write_results("replay", {"results": results, "record": args.ninja_log or args.record},
                                       "### Replay simulator (`bench/replay.py`)\n\n" + text)
        print("results: %s.{json,md}" % os.path.relpath(where, benchlib.REPO_ROOT))
    for r in broken:
        print("replay: longest-fit with known peaks OOMs on %d cores / %d GiB (%s)" % (r["cores"], r["memory_gib"], r["policy"]),
              file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
