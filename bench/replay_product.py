#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The replay with the launcher's own decision (issue 29 item 5): ``_admission_policy.pick_next`` - the function every
waiting compile's launcher calls under the ledger's lock - picks each start, instead of bench/replay.py's model of it.

Same record, shapes and knowledge (warm: this node's peaks and times; seeded: another node's peaks, times off by a
log-normal factor); reservations as the launcher makes them (learned peak x its margin). Printed beside the model's
longest-fit: where the two differ, one of them is wrong.
    python bench/replay_product.py [--record FILE] [--shapes 2x16,32x64]
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
import _admission_policy  # noqa: E402 pylint: disable=wrong-import-position,import-error


class Launcher(replay.LongestFit):
    """longest-fit as the launcher decides it: pick_next over the waiting compiles, each with the bytes it would
    reserve, its learned seconds, whether it was learned and when it arrived."""
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
    args = parser.parse_args(argv)
    try:
        rows = compare(replay.load_record(args.record), replay.parse_shapes(args.shapes))
    except (replay.ReplayError, OSError, ValueError) as exc:
        print("replay_product: %s" % exc, file=sys.stderr)
        return 2
    print(markdown(rows))
    oom = [row for row in rows if row[5]["oom_kills"] or row[5]["failed"]]
    for cores, mem_gib, kind, _bound, _model, product in oom:
        print("replay_product: the launcher's decision OOMs on %d cores / %d GiB (%s): %s" % (
            cores, mem_gib, kind, product), file=sys.stderr)
    return 1 if oom else 0


if __name__ == "__main__":
    sys.exit(main())
