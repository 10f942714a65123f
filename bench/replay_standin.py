#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check bench/replay.py's model against real builds it can replay here (issue 29 item 5).

The stand-in tests/projects/standin_mixed_memory (two heavy sources, 300 MiB for 3 s, first in the build order; ten
light ones, 40 MiB for 1.5 s) is built with ninja: once at -j1 through the admission launcher (the record: its
.ninja_log and the launcher's peaks.json), then at each fixed -j without it. The replay of the record at that -j
predicts the compile steps' makespan (first start to last end in .ninja_log); the error is (predicted - measured) /
measured. Two compiler wrappers: hogcc.py (holds the memory, then sleeps: a compile that barely needs a core) and
bench/replay_data/burncc.py (holds it and spends the seconds on the CPU: compiles share the cores, as cicc does).
Each compile's CPU share for the model = the record's CPU seconds (RUSAGE_CHILDREN of ninja) / its compile seconds.
Starts real processes: run under the shared lock,
    flock /tmp/gpufleet-heavy.lock python bench/replay_standin.py [--jobs 2,4,8] [--wrappers hogcc,burncc]
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import benchlib  # noqa: E402 pylint: disable=wrong-import-position
import replay  # noqa: E402 pylint: disable=wrong-import-position

MIXED = os.path.join(REPO, "tests", "projects", "standin_mixed_memory")
ADMISSION = os.path.join(REPO, "plugins", "module_utils", "_build", "_admission.py")
# both wrappers touch all their memory within ~0.1 s of a 1.5-3 s compile (cicc grows over minutes: replay.GROWTH)
GROW = {"hogcc": 0.03, "burncc": 0.03}
WRAPPERS = {"hogcc": os.path.join(MIXED, "hogcc.py"), "burncc": os.path.join(HERE, "replay_data", "burncc.py")}


def configure(build, wrapper, config=None):
    launcher = [sys.executable, wrapper]
    if config:
        launcher = [sys.executable, ADMISSION, "--config=" + config] + launcher
    subprocess.run(["cmake", "-S", MIXED, "-B", build, "-G", "Ninja", "-DCMAKE_C_COMPILER_LAUNCHER=" + ";".join(launcher)],
                   stdout=subprocess.DEVNULL, check=True)


def ninja(build, jobs):
    """ninja -jN; (CPU seconds of its children, the neighbours' CPU meanwhile in cores, .ninja_log text)."""
    before, busy, start = resource.getrusage(resource.RUSAGE_CHILDREN), benchlib.cpu_busy_seconds(), time.time()
    subprocess.run(["ninja", "-C", build, "-j%d" % jobs], stdout=subprocess.DEVNULL, check=True)
    after, busy, wall = resource.getrusage(resource.RUSAGE_CHILDREN), benchlib.cpu_busy_seconds() - busy, time.time() - start
    ours = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    with open(os.path.join(build, ".ninja_log")) as handle:
        return ours, max(0.0, busy - ours) / wall, handle.read()


def compile_span(log_text):
    """First start to last end (s) of the object steps in a .ninja_log."""
    spans = [(int(f[0]), int(f[1])) for f in (line.split("\t") for line in log_text.splitlines()[1:]) if len(f) > 3
             and f[3].endswith(".o")]
    return (max(end for start, end in spans) - min(start for start, end in spans)) / 1000.0


def record(work, name, wrapper):
    """The -j1 build through the admission launcher: (jobs for the replay, the record's facts)."""
    state = os.path.join(work, name + "-record")
    os.makedirs(state)
    config = os.path.join(state, "admission.json")
    with open(config, "w") as handle:
        json.dump({"state_dir": os.path.join(state, "admission"), "peaks_path": os.path.join(state, "peaks.json"),
                   "root": MIXED, "reserve_bytes": 16 * 1024 ** 2, "default_bytes": 100 * 1024 ** 2}, handle)
    build = os.path.join(state, "build")
    configure(build, wrapper, config)
    cpu, background, log_text = ninja(build, 1)
    with open(os.path.join(state, "peaks.json")) as handle:
        peaks = json.load(handle)
    log = replay.parse_ninja_log(log_text)
    jobs = replay.jobs_from_build(log, peaks)
    share, cores = cpu / sum(j.seconds for j in jobs), os.cpu_count()
    # the share seen is the compile's own share slowed by the neighbours: share = f x rate, rate = min(1, cores / (f + b))
    true_share, rate = share, 1.0
    for dummy in range(20):
        rate = min(1.0, cores / (true_share + background))
        true_share = min(1.0, share / rate)
    for job in jobs:
        job.cpu, job.grow = true_share, GROW[name]
        job.seconds *= rate     # its time on an idle machine
    return jobs, {"compile_seconds": round(sum(j.seconds for j in jobs), 2), "cpu_share_seen": round(share, 3),
                  "cpu_share": round(true_share, 3), "background_cores": round(background, 2),
                  "peaks_mib": dict((j.name, round(j.peak / 1024 ** 2)) for j in jobs)}


def capped(work, jobs, cap_mib, sweep):
    """Under guarded_build in a real memory cgroup of cap_mib (bench/admission.py's harness): fixed -j for each of
    sweep and first-come admission (warm: the record's peaks) at the largest; measured against predicted, with the OOM
    kills the cgroup counted."""
    sys.path.insert(0, os.path.join(REPO, "tests", "build"))
    from test_admission import admission_config, build_mix, configure_mix, oom_kills  # pylint: disable=import-outside-toplevel
    peaks = os.path.join(work, "hogcc-record", "peaks.json")
    rows, cores, limit_gib = [], os.cpu_count(), cap_mib / 1024.0
    modes = [("fixed -j%d" % j, j, None, replay.Fixed(j)) for j in sweep]
    modes.append(("first-come admission -j%d, warm" % max(sweep), max(sweep), peaks, replay.FirstCome()))
    for label, j, peaks_path, policy in modes:
        build = os.path.join(work, "capped-%d-%s" % (j, "admit" if peaks_path else "fixed"))
        configure_mix(build, admission_config(work, peaks_path) if peaks_path else None)
        result = build_mix(build, "replay-check", j, cap_mib)
        measured = result.get("duration") or sum(a.get("duration") or 0 for a in result.get("attempts") or [])
        known = replay.knowledge(jobs, "warm") if peaks_path else {}
        sim = replay.Sim(jobs, cores, limit_gib, policy, known, reserve=16 * 1024 ** 2)
        sim.jobs = j
        predicted = sim.run()
        rows.append({"mode": label, "cap_mib": cap_mib, "measured_s": round(measured, 2), "oom_kills": oom_kills(result),
                     "predicted_s": round(predicted["makespan"], 2), "predicted_oom_kills": predicted["oom_kills"],
                     "error_pct": round(100.0 * (predicted["makespan"] - measured) / measured, 1)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="2,4,8")
    parser.add_argument("--wrappers", default="hogcc,burncc")
    parser.add_argument("--cap-mib", type=int, default=500, help="memory cgroup for the guarded_build rows (0: none)")
    args = parser.parse_args(argv)
    cores = os.cpu_count()
    work = tempfile.mkdtemp(prefix="gpufleet-replay-standin-")
    rows, records, cap_rows = [], {}, []
    try:
        for name in args.wrappers.split(","):
            jobs, facts = record(work, name, WRAPPERS[name])
            records[name] = facts
            for j in [int(x) for x in args.jobs.split(",")]:
                build = os.path.join(work, "%s-j%d" % (name, j))
                configure(build, WRAPPERS[name])
                dummy, background, log_text = ninja(build, j)
                measured = compile_span(log_text)
                idle = replay.Sim(jobs, cores, 1024, replay.Fixed(j), {}).run()["makespan"]
                predicted = replay.Sim(jobs, cores, 1024, replay.Fixed(j), {}, background=background).run()["makespan"]
                rows.append({"wrapper": name, "jobs": j, "measured_s": round(measured, 2), "predicted_s": round(predicted, 2),
                             "error_pct": round(100.0 * (predicted - measured) / measured, 1),
                             "idle_predicted_s": round(idle, 2), "idle_error_pct": round(100.0 * (idle - measured) / measured, 1),
                             "background_cores": round(background, 2)})
                print(json.dumps(rows[-1]), flush=True)
            if name == "hogcc" and args.cap_mib:
                cap_rows = capped(work, jobs, args.cap_mib, [int(x) for x in args.jobs.split(",")])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"cores": cores, "records": records}, indent=1))
    print("\n| wrapper | -j | measured | predicted (neighbours' CPU) | error | predicted (idle machine) | error "
          "| neighbours' CPU |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print("| %s | %d | %.1f s | %.1f s | %+.1f %% | %.1f s | %+.1f %% | %.2f cores |" % (
            r["wrapper"], r["jobs"], r["measured_s"], r["predicted_s"], r["error_pct"], r["idle_predicted_s"],
            r["idle_error_pct"], r["background_cores"]))
    if cap_rows:
        print("\n| under guarded_build, %d MiB cgroup | measured | OOM kills | predicted | OOM kills | error |\n"
              "| --- | ---: | ---: | ---: | ---: | ---: |" % args.cap_mib)
    for r in cap_rows:
        print("| %s | %.1f s | %d | %.1f s | %d | %+.1f %% |" % (
            r["mode"], r["measured_s"], r["oom_kills"], r["predicted_s"], r["predicted_oom_kills"], r["error_pct"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
