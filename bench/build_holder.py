# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the build's guard costs (issue 18 findings 2, 3): the Python holder that ends the build when the module dies.

1. Start-to-exit latency of a build of ``true`` through ``BuildProcess`` (holder started, build run, exit status
   reported, holder released and gone), against a bare ``subprocess`` of ``true``: the overhead each attempt pays.
2. The holder's resident memory (``VmRSS``) while the build runs: it sits in the build's memory cgroup.
3. Time from the module's end (its side of the holder's stdin closing) until the build's process is gone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess
import tempfile
import time

import benchlib
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import BuildProcess, kill_session
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._confinement import Confinement


def holder_run(directory, log, command):
    build = BuildProcess(command, Confinement("bench", 1, 0), directory, dict(os.environ), log)
    return build


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (IOError, OSError):
        return False


def child_of(pid, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as handle:
                children = handle.read().split()
            if children:
                return int(children[0])
        except (IOError, OSError):
            pass
        time.sleep(0.005)
    raise benchlib.BenchFailure("the holder started no build")


def main():
    info = benchlib.machine()
    runs = benchlib.env_int("GPUFLEET_BENCH_HOLDER_RUNS", 30, 3)
    directory = tempfile.mkdtemp(prefix="gpufleet-holder-bench-")
    bare, held, rss, death = [], [], [], []
    log = open(os.path.join(directory, "log"), "ab")
    try:
        for dummy in range(runs):
            start = time.perf_counter()
            subprocess.call(["true"])
            bare.append(time.perf_counter() - start)
            start = time.perf_counter()
            build = holder_run(directory, log, ["true"])
            while not build.wait(1.0):
                pass
            build.release()
            held.append(time.perf_counter() - start)
            build = holder_run(directory, log, ["sleep", "60"])
            sleeper = child_of(build.process.pid)
            rss.append(rss_kib(build.process.pid))
            start = time.perf_counter()
            build.process.stdin.close()  # what the module's death does
            while alive(sleeper):
                time.sleep(0.001)
            death.append(time.perf_counter() - start)
            build.process.wait(timeout=30)
            kill_session(build.pgid)
    finally:
        log.close()
        shutil.rmtree(directory, ignore_errors=True)
    overhead = benchlib.median(held) - benchlib.median(bare)
    rows = [
        ["a build of `true`, bare subprocess", "%.1f ms" % (benchlib.median(bare) * 1e3), "-"],
        ["a build of `true` under the holder (start, report, release)", "%.1f ms" % (benchlib.median(held) * 1e3),
         "+%.1f ms per attempt" % (overhead * 1e3)],
        ["the holder's resident memory while the build runs", "%d KiB" % benchlib.median(rss), "in the build's cgroup"],
        ["module gone -> the build's process gone", "%.1f ms (max %.1f)" % (benchlib.median(death) * 1e3, max(death) * 1e3), "-"],
    ]
    table = benchlib.markdown_table(["what", "median of %d" % runs, "note"], rows)
    targets = [("the build dies within 1 s of its module", max(death) < 1.0, "max %.3f s" % max(death), True),
               ("the holder costs an attempt under 0.5 s", overhead < 0.5, "%.3f s" % overhead)]
    notes = ["the holder is `python -c` (the module's interpreter): start-up dominates its overhead",
             "death latency: the holder wakes on its stdin's EOF, scans /proc for the build's session, descendants "
             "and marker, and SIGKILLs them"]
    return benchlib.report("build_holder", "What the build's guard costs", info, table, notes,
                           {"bare": bare, "held": held, "rss_kib": rss, "death": death}, targets)


if __name__ == "__main__":
    benchlib.main_wrapper(main)
