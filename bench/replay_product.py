#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The replay with the launcher's own decision (issue 29 item 5): ``_admission_policy.pick_next`` - the function every
waiting compile's launcher calls under the ledger's lock - picks each start, instead of bench/replay.py's model of it.

Same record, shapes and knowledge (warm: this node's peaks and times; seeded: another node's peaks, times off by a
log-normal factor); reservations as the launcher makes them (learned peak x its margin). Printed beside the model's
longest-fit: where the two differ, one of them is wrong. Then the product's whole path (bench/replay_cold.py, issue
35): ``pick_next`` with its claims, ``_admission_pressure.decide`` freezing, thawing and evicting at the launcher's
samples, warm, seeded and fully cold, with the cold / warm ratio and the OOM kills, and over shuffled ninja orders.
    python bench/replay_product.py [--record FILE] [--shapes 2x16,32x64] [--orders N]
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "plugins", "module_utils", "_build"))
import replay  # noqa: E402 pylint: disable=wrong-import-position
import replay_cold  # noqa: E402 pylint: disable=wrong-import-position
import _admission_policy  # noqa: E402 pylint: disable=wrong-import-position,import-error


class Launcher(replay.LongestFit):
    """longest-fit as the launcher decides it: pick_next over the waiting compiles, each with the bytes it would
    reserve, its learned seconds, whether it was learned and when it arrived. The bytes are the model's ``need``,
    capped at the budget; the launcher's ``expected_bytes`` is not capped (a source whose peak x margin is over the
    budget, fp8_gemm_kernel.cu's 15.13 GiB x 1.15 on 16 GiB): ``product_path`` runs that, and differs on 2 / 16 GiB."""
    name = "launcher"

    def pick(self, sim):
        waiting = []
        for entry in sim.waiting:
            job = entry[2]
            peak, seconds = sim.known.get(job.name, (None, None))
            waiting.append({"bytes": self.need(sim, job), "threads": 1, "seconds": seconds, "learned": bool(peak),
                            "since": entry[0], "entry": entry})
        running = [{"bytes": run.reserved, "threads": 1, "learned": run.job.name in sim.known, "started": run.started,
                    "seconds": sim.known.get(run.job.name, (None, None))[1]} for run in sim.running]
        chosen = _admission_policy.pick_next(waiting, running, sim.budget, sim.cores, replay.MARGIN, sim.now)
        return chosen and (chosen["entry"], chosen["bytes"])


def compare(jobs, shapes, seed=29):
    """[(cores, GiB, knowledge, bound, model result, launcher result)]."""
    rows = []
    for cores, mem_gib in shapes:
        bound = replay.lower_bound(jobs, cores, mem_gib * replay.GIB - replay.RESERVE)[0]
        for kind in ("warm", "seeded"):
            model = replay.replay(jobs, cores, mem_gib, replay.LongestFit(), kind, rng=random.Random(seed))
            product = replay.replay(jobs, cores, mem_gib, Launcher(), kind, rng=random.Random(seed))
            rows.append((cores, mem_gib, kind, bound, model, product))
    return rows


def product_path(jobs, shapes, orders=0, seed=29):
    """The product's own path (bench/replay_cold.py) on each shape: [{cores, memory_gib, row, bound_s, result,
    warm_s, orders: [(cold / warm, OOM kills)]}], rows warm, seeded, cold (the model's growth rate at each sample),
    cold (the launcher's measured rate)."""
    found = []
    for cores, mem_gib in shapes:
        bound = replay.lower_bound(jobs, cores, mem_gib * replay.GIB - replay.RESERVE)[0]
        warm = replay_cold.cold(jobs, cores, mem_gib, "warm")
        for row, kind, rate in (("warm", "warm", "model"), ("seeded", "seeded", "model"),
                                ("seeded by the fleet (3 nodes)", "fleet", "model"), ("cold", "cold", "model"),
                                ("cold, measured rate", "cold", "measured")):
            result = warm if row == "warm" else replay_cold.cold(jobs, cores, mem_gib, kind, random.Random(seed), rate=rate)
            shuffled, rng = [], random.Random(seed)
            for dummy in range(orders if kind == "cold" else 0):
                order = sorted(jobs, key=lambda j: j.order)
                rng.shuffle(order)
                other = replay_cold.ColdSim(jobs, cores, mem_gib, {}, order, rate=rate).run()
                against = replay_cold.ColdSim(jobs, cores, mem_gib, replay.knowledge(jobs, "warm"), order).run()
                shuffled.append((other["makespan"] / against["makespan"], other["oom_kills"]))
            found.append({"cores": cores, "memory_gib": mem_gib, "row": row, "bound_s": bound, "result": result,
                          "warm_s": warm["makespan"], "orders": shuffled})
    return found


def product_markdown(rows):
    lines = ["| node | product path (claim, freeze, evict) | makespan | x bare bound | / warm | OOM kills "
             "| freezes / thaws / evictions (work lost) | most held | shuffled orders: / warm mean, worst; with an OOM |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        res, ratios = r["result"], [ratio for ratio, dummy in r["orders"]]
        lines.append("| %d cores / %d GiB | %s | %.0f s | %.2f | %.2f | %d | %d / %d / %d (%.0f s) | %.1f GiB | %s |" % (
            r["cores"], r["memory_gib"], r["row"], res["makespan"], res["makespan"] / r["bound_s"],
            res["makespan"] / r["warm_s"], res["oom_kills"], res["freezes"], res["thaws"], res["evictions"],
            res["lost_seconds"], res["top_bytes"] / replay.GIB,
            "%.2f, %.2f; %d of %d" % (sum(ratios) / len(ratios), max(ratios), sum(1 for dummy, oom in r["orders"] if oom),
                                      len(ratios)) if ratios else "-"))
    return "\n".join(lines)


def markdown(rows):
    lines = ["| node | knowledge | bound | model's longest-fit | launcher's pick_next | OOM kills (model / launcher) |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for cores, mem_gib, kind, bound, model, product in rows:
        lines.append("| %d cores / %d GiB | %s | %.0f s | %.0f s (%.2fx) | %.0f s (%.2fx) | %d / %d |" % (
            cores, mem_gib, kind, bound, model["makespan"], model["makespan"] / bound, product["makespan"],
            product["makespan"] / bound, model["oom_kills"], product["oom_kills"]))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", default=replay.DEFAULT_RECORD)
    parser.add_argument("--shapes", default=",".join("%dx%d" % s for s in replay.SHAPES))
    parser.add_argument("--orders", type=int, default=10, help="shuffled ninja orders per cold row (quick mode: 0)")
    args = parser.parse_args(argv)
    quick = os.environ.get("GPUFLEET_BENCH_QUICK", "") not in ("", "0", "false", "no")
    try:
        jobs, shapes = replay.load_record(args.record), replay.parse_shapes(args.shapes)
        rows = compare(jobs, shapes)
        path = product_path(jobs, shapes, 0 if quick else args.orders)
    except (replay.ReplayError, OSError, ValueError) as exc:
        print("replay_product: %s" % exc, file=sys.stderr)
        return 2
    print(markdown(rows))
    print()
    print(product_markdown(path))
    oom = [row for row in rows if row[5]["oom_kills"] or row[5]["failed"]]
    for cores, mem_gib, kind, _bound, _model, product in oom:
        print("replay_product: the launcher's decision OOMs on %d cores / %d GiB (%s): %s" % (
            cores, mem_gib, kind, product), file=sys.stderr)
    killed = [r for r in path if r["result"]["oom_kills"] or r["result"]["failed"] or any(oom for dummy, oom in r["orders"])]
    for r in killed:
        print("replay_product: the product's path OOMs on %d cores / %d GiB (%s): %s" % (
            r["cores"], r["memory_gib"], r["row"], r["result"]), file=sys.stderr)
    return 1 if oom or killed else 0


if __name__ == "__main__":
    sys.exit(main())
