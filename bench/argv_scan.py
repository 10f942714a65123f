#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the build-process scan among thousands of processes with long command lines (issue 18 finding 15).

Any local user can start 5,000 processes whose command lines are 100 KB (the kernel allows 2 MiB each). In a PID
namespace of our own (``unshare --pid --fork --mount-proc``, so only these processes are in its /proc), P copies of
``sleep`` with an argv of L bytes each, and K copies named ``ninja``. Then, each in a fresh Python so its peak RSS
is its own, ``collect_build_processes()`` by name and with a pattern:

- bounded: what node_facts and build_processes run (argv[0]'s 4 KiB by name; with patterns at most 32 KiB each and
  16 MiB for all);
- unbounded: the same code with the bounds lifted, which is what the scan did before (every whole command line).

Knobs: GPUFLEET_BENCH_PROCESSES (5000), GPUFLEET_BENCH_ARGV_BYTES (100000), GPUFLEET_BENCH_NINJAS (20),
GPUFLEET_BENCH_REPEAT (3). Needs root (unshare).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import benchlib
from benchlib import BenchFailure

COLLECTIONS = os.path.join(benchlib.REPO_ROOT, ".tmp", "collections")

# Runs inside the namespace (pid 1 there): start the sleepers, then one measuring Python per variant and round.
INNER = r"""
import json, os, subprocess, sys, time
total, ninjas, argv_bytes, repeat, ninja, measure = sys.argv[1:7]
total, ninjas, argv_bytes, repeat = int(total), int(ninjas), int(argv_bytes), int(repeat)
filler = "0" * argv_bytes  # sleep adds its arguments: 900 + 0
children = []
for index in range(total):
    program = ninja if index < ninjas else "sleep"
    children.append(subprocess.Popen([program, "900", filler], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, close_fds=True))
rows = []
for variant in ("bounded", "unbounded"):
    for patterns in ([], ["zzz-no-such"]):
        for _round in range(repeat):
            out = subprocess.check_output([sys.executable, measure, variant, json.dumps(patterns)])
            rows.append(dict(json.loads(out), variant=variant, patterns=bool(patterns)))
print(json.dumps(rows))
for child in children:
    child.kill()
"""

# One measurement: a scan, its wall time and this process's peak RSS (nothing else ran in it).
MEASURE = r"""
import json, os, resource, sys, time
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _processes
variant, patterns = sys.argv[1], json.loads(sys.argv[2])
if variant == "unbounded":
    _processes.ARGV0_READ_MAX = _processes.CMDLINE_TOTAL_MAX = 1 << 40
    _processes.PATTERN_TEXT_MAX = 1 << 40
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.monotonic()
facts = _processes.collect_build_processes(patterns=patterns)
seconds = time.monotonic() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "peak_rss_kib": peak, "start_rss_kib": before, "count": facts["count"],
                  "scanned": facts["scanned"], "errors": facts["errors"]}))
"""


def main():
    total = benchlib.env_int("GPUFLEET_BENCH_PROCESSES", 5000, 200)
    argv_bytes = benchlib.env_int("GPUFLEET_BENCH_ARGV_BYTES", 100000, 100000)
    ninjas = benchlib.env_int("GPUFLEET_BENCH_NINJAS", 20, 5)
    repeat = benchlib.env_int("GPUFLEET_BENCH_REPEAT", 3, 1)
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise BenchFailure("needs root and unshare (a PID namespace of its own)")
    info = benchlib.machine()
    info["load_average"] = benchlib.wait_for_low_load()
    work = tempfile.mkdtemp(prefix="gpufleet-argv-scan-")
    try:
        ninja = os.path.join(work, "ninja")
        shutil.copy2("/bin/sleep", ninja)
        inner, measure = os.path.join(work, "inner.py"), os.path.join(work, "measure.py")
        with open(inner, "w") as handle:
            handle.write(INNER)
        with open(measure, "w") as handle:
            handle.write(MEASURE)
        env = dict(os.environ, PYTHONPATH=COLLECTIONS)
        started = time.monotonic()
        done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable, inner,
                               str(total), str(ninjas), str(argv_bytes), str(repeat), ninja, measure],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env,
                              timeout=1800, check=False)
        if done.returncode != 0:
            raise BenchFailure("the namespace run failed (rc %s): %s" % (done.returncode, done.stderr[-2000:]))
        rows = json.loads(done.stdout.strip().splitlines()[-1])
        wall = time.monotonic() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)
    wrong = [row for row in rows if row["count"] != ninjas]
    if wrong:
        raise BenchFailure("a scan counted %s instead of %d ninjas" % (sorted(set(r["count"] for r in wrong)), ninjas))
    table_rows, medians = [], {}
    for variant in ("bounded", "unbounded"):
        for patterns in (False, True):
            mine = [row for row in rows if row["variant"] == variant and row["patterns"] == patterns]
            key = "%s%s" % (variant, "_patterns" if patterns else "")
            medians[key] = {"seconds": benchlib.median([r["seconds"] for r in mine]),
                            "peak_rss_mib": benchlib.median([r["peak_rss_kib"] for r in mine]) / 1024.0,
                            "start_rss_mib": benchlib.median([r["start_rss_kib"] for r in mine]) / 1024.0}
            table_rows.append(["%s, %s" % (variant, "a pattern" if patterns else "by name"),
                               benchlib.fmt_seconds(medians[key]["seconds"]),
                               "%.0f MiB" % medians[key]["peak_rss_mib"],
                               "%.0f MiB" % (medians[key]["peak_rss_mib"] - medians[key]["start_rss_mib"]),
                               str(mine[0]["count"])])
    table = benchlib.markdown_table(["%d processes, argv %d bytes each" % (total, argv_bytes), "median s", "peak RSS",
                                     "grown by the scan", "ninjas counted"], table_rows)
    grown = medians["bounded_patterns"]["peak_rss_mib"] - medians["bounded_patterns"]["start_rss_mib"]
    targets = [("same count (%d) in every scan" % ninjas, not wrong, "all %d" % ninjas, True),
               ("a bounded scan with patterns grows by <= 128 MiB (16 MiB of command lines, their text and the "
                "matcher's copy)", grown <= 128, "%.0f MiB" % grown),
               ("a bounded scan by name <= 2 s", medians["bounded"]["seconds"] <= 2.0,
                "%.2f s" % medians["bounded"]["seconds"])]
    notes = ["medians over %d rounds, each in a fresh Python (peak RSS is that process's); %.0f s in all with the "
             "processes' start" % (repeat, wall),
             "unbounded = the same code with the read bounds lifted: what the scan did before issue 18"]
    return benchlib.report("argv_scan", "Build-process scan among %d processes with %d-byte command lines"
                           % (total, argv_bytes), info, table, notes,
                           {"processes": total, "argv_bytes": argv_bytes, "ninjas": ninjas, "repeat": repeat,
                            "rows": rows, "medians": medians}, targets)


if __name__ == "__main__":
    benchlib.main_wrapper(main)
