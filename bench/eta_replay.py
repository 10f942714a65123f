#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cold build's ETA replayed from a real build's own record (issue 35: "the ETA at 5 minutes within 30 % of the
truth"), through the product's rule: ``_timeline.paced_eta`` (known seconds per source at this build's pace) and the
``EtaSmoother`` the status shows (its constant for known times, ``LEARNED_TAU``, and others), stepped every
``--step`` seconds as the build's follower steps it. The build is one uninterrupted ninja run of a `.ninja_log` (a
log holding several runs - CMake's glob check, a resume - is split where the end times go back; the run with the
most steps is replayed); at time t the steps that ended by t are done, and the truth is the run's last end less t.

Known times: census files (``gpufleet-admission-census/1``) or replay records (``{"objects": [{source, seconds}]}``,
bench/replay_data), each a row; ``--taus`` the smoother's time constants, each a row of its own.
    .venv/bin/python bench/eta_replay.py [--log L] [--times F ...] [--taus 600,120] [--at 300,900,1800] [--parallel 2]
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "plugins", "module_utils", "_build"))
import benchlib  # noqa: E402 pylint: disable=wrong-import-position
import _timeline as timeline  # noqa: E402 pylint: disable=wrong-import-position,import-error

DATA = os.path.join(HERE, "replay_data")
LOG = os.path.join(DATA, "sgl_kernel_sm120_cold.ninja_log")
TIMES = [os.path.join(DATA, "sgl_kernel_sm120.json"),
         os.path.join(REPO, "roles", "sgl_kernel", "files", "census", "sgl-kernel-0.3.19-120.json")]


def ninja_runs(text):
    """``.ninja_log`` text -> its ninja runs, each ``[(start_ms, end_ms, output)]``: ninja appends a step when it
    ends, so within one run the end times never go back; a new run starts its clock at 0."""
    runs, last_end = [], None
    for line in (text or "").splitlines():
        fields = line.split("\t")
        if line.startswith("#") or len(fields) < 4:
            continue
        try:
            start, end = int(fields[0]), int(fields[1])
        except ValueError:
            continue
        if last_end is None or end < last_end:
            runs.append([])
        runs[-1].append((start, end, fields[3]))
        last_end = end
    return runs


def known_times(document):
    """``{source: seconds}`` of a census file or a replay record; ValueError naming what it is not."""
    if isinstance(document, dict) and isinstance(document.get("sources"), dict):
        return dict((path, float(entry["seconds"])) for path, entry in document["sources"].items()
                    if isinstance(entry, dict) and entry.get("seconds"))
    if isinstance(document, dict) and isinstance(document.get("objects"), list):
        return dict((row["source"], float(row["seconds"])) for row in document["objects"] if row.get("seconds"))
    raise ValueError("neither a census (sources) nor a replay record (objects)")


def replay_eta(steps, seconds, parallel, taus, step=10.0):
    """``{tau: [(t, shown, raw, truth)]}`` every ``step`` seconds of one ninja run (``steps``: its log entries) with
    ``seconds`` as the known times; ``tau`` the smoother's constant for an estimate from known times (the product's:
    ``_timeline.LEARNED_TAU``), 0 = the raw estimate."""
    end = max(e for _s, e, _o in steps) / 1000.0
    ordered = sorted(steps, key=lambda entry: entry[1])
    smoothers = dict((tau, timeline.EtaSmoother(learned_tau=tau or 1.0)) for tau in taus)
    rows = dict((tau, []) for tau in taus)
    durations, index, now = {}, 0, step
    while now < end:
        while index < len(ordered) and ordered[index][1] <= now * 1000.0:
            start_ms, end_ms, output = ordered[index]
            durations[output] = (end_ms - start_ms) / 1000.0
            index += 1
        raw = timeline.paced_eta(durations, seconds, parallel)
        for tau, smoother in smoothers.items():
            shown = smoother.update(raw, "learned", now) if tau else raw
            rows[tau].append((now, shown, raw, end - now))
        now += step
    return rows


def at(samples, moment):
    """The sample at ``moment`` seconds (the last one not after it), or None."""
    found = [sample for sample in samples if sample[0] <= moment]
    return found[-1] if found else None


def error(shown, truth):
    return None if shown is None or not truth else (shown - truth) / truth


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--log", default=LOG)
    parser.add_argument("--times", action="append", help="census or replay record (repeat); default: %s" % TIMES)
    parser.add_argument("--taus", default="600,300,120", help="the smoother's constants for known times, seconds")
    parser.add_argument("--at", default="300,900,1800,2700,3600")
    parser.add_argument("--parallel", type=int, default=2, help="compiles at a time (the follower's min(jobs, CPUs))")
    parser.add_argument("--step", type=float, default=10.0)
    args = parser.parse_args()
    try:
        with open(args.log) as handle:
            runs = ninja_runs(handle.read())
        taus = [float(value) for value in args.taus.split(",") if value.strip()] + [0.0]
        moments = [float(value) for value in args.at.split(",") if value.strip()]
        documents = []
        for path in args.times or TIMES:
            with open(path) as handle:
                documents.append((path, known_times(json.load(handle))))
    except (OSError, IOError, ValueError, KeyError, TypeError) as exc:
        raise benchlib.BenchFailure("bad input: %s (--log a .ninja_log, --times census or replay record files, "
                                    "--taus and --at comma-separated seconds)" % exc)
    if not runs:
        raise benchlib.BenchFailure("%s holds no ninja steps" % args.log)
    steps = max(runs, key=len)
    truth_end = max(e for _s, e, _o in steps) / 1000.0
    header = ["known times", "smoother tau (learned)"] + ["at %.0f s (truth %.0f s)" % (m, truth_end - m) for m in moments] + [
        "mean miss"]
    table, data = [], {"log": os.path.relpath(args.log, REPO), "steps": len(steps), "end_seconds": truth_end, "rows": []}
    for path, seconds in documents:
        rows = replay_eta(steps, seconds, args.parallel, taus, args.step)
        for tau in taus:
            cells = []
            for moment in moments:
                sample = at(rows[tau], moment)
                shown = sample[1] if sample else None
                miss = error(shown, truth_end - moment)
                cells.append("-" if shown is None else "%.0f s (%+.0f %%)" % (shown, 100 * miss))
                data["rows"].append({"times": os.path.relpath(path, REPO), "tau": tau, "at": moment,
                                     "shown": shown, "truth": truth_end - moment, "error": miss})
            mean = sum(abs(row["error"]) for row in data["rows"][-len(moments):] if row["error"] is not None) / len(moments)
            table.append([os.path.relpath(path, REPO), ("%.0f s" % tau if tau else "raw") + (
                " (the product's)" if tau == timeline.LEARNED_TAU else "")] + cells + ["%.0f %%" % (100 * mean)])
    notes = ["%d steps of one ninja run of %s, ending at %.0f s; parallel %d; the follower stepped every %.0f s" % (
        len(steps), os.path.relpath(args.log, REPO), truth_end, args.parallel, args.step)]
    return benchlib.report("eta_replay", "The cold ETA replayed from a real build's .ninja_log (issue 35)",
                           benchlib.machine(), benchlib.markdown_table(header, table), notes, data, [])


if __name__ == "__main__":
    benchlib.main_wrapper(main)
