# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the memory timeline costs guarded_build (issue 14 item 2): target under 1% of one core during a build.

1. Per status interval, the timeline adds one ``Timeline.add`` and a longer status file (the whole timeline,
   at its 240-sample bound, is written with the status every interval). Measured here at the bound, in CPU
   seconds (``time.process_time``), as the difference between writing the status with and without it.
2. A real guarded build of the hungry test project, run in this process (``GuardedBuild``) at a 0.5 s status
   interval (4x the default rate): the CPU the module's whole watching loop used (``getrusage(RUSAGE_SELF)``: the
   build's compilers are children and not counted), over the build's wall time, and the timeline's share of it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import resource
import shutil
import tempfile
import time

import benchlib
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_state as state
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._guarded_build import GuardedBuild
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import find_executable, run_with_timeout, search_path
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._timeline import DEFAULT_CAPACITY, Timeline
from ansible_collections.gpufleet.preflight.plugins.modules.guarded_build import ARGUMENT_SPEC

HUNGRY = os.path.join(benchlib.REPO_ROOT, "tests", "projects", "hungry")
MIB = 1024 ** 2


def status_like(timeline=None):
    status = {"state": "running", "name": "bench", "log": "/srv/build/gpufleet-build.log", "max_attempts": 4,
              "memory_limit_bytes": 400 * MIB, "memory_limit_human": "400Mi", "started_at": time.time(),
              "attempts": [], "module_pid": os.getpid(), "confinement": "cgroupfs", "attempt": 1, "jobs": 2,
              "build_pgid": 4242, "progress": {"done": 7, "total": 14, "percent": 50.0}, "memory_bytes": 250 * MIB,
              "memory_human": "250Mi", "elapsed_seconds": 1234.5, "updated_at": time.time()}
    if timeline is not None:
        status["timeline"] = timeline.to_list()
    return status


def micro(iterations, directory):
    """CPU seconds per interval: Timeline.add at the bound; the status write without and with the timeline."""
    timeline = Timeline()
    for index in range(DEFAULT_CAPACITY):  # full: the most a status file ever carries
        timeline.add(index * 2.0, (index % 97) * MIB, 2, 1)
    path = os.path.join(directory, state.STATUS_NAME)
    results = {"samples": len(timeline.to_list())}
    for label, with_timeline in (("write_without", False), ("write_with", True)):
        started = time.process_time()
        for _index in range(iterations):
            state.write_json_atomic(path, status_like(timeline if with_timeline else None))
        results[label] = (time.process_time() - started) / iterations
    results["status_bytes_with"] = os.path.getsize(path)
    started = time.process_time()
    for index in range(iterations):  # at the bound: each add may downsample
        timeline.add(DEFAULT_CAPACITY * 2.0 + index * 2.0, (index % 89) * MIB, 2, 1)
    results["add"] = (time.process_time() - started) / iterations
    results["per_interval"] = results["add"] + max(0.0, results["write_with"] - results["write_without"])
    return results


def real_build(directory, interval, steps):
    source = os.path.join(directory, "hungry")
    shutil.copytree(HUNGRY, source)
    params = dict((name, spec.get("default")) for name, spec in ARGUMENT_SPEC.items())
    params.update(cmd="cmake -S . -B build -G Ninja -DHOG_MIB=100 -DHOG_SECONDS=2 -DHOG_STEPS=%d >/dev/null && "
                      "cmake --build build" % steps,
                  chdir=source, name="timeline-bench", jobs=2, memory_limit="400MiB", memory_per_thread="100MiB",
                  status_interval=interval, environment={}, artifacts=[], source_ignore=[".git", "build"])
    build = GuardedBuild(params, run_with_timeout, lambda name, env: find_executable(name, search_path([], environ=env)))
    before, wall = resource.getrusage(resource.RUSAGE_SELF), time.time()
    result = build.execute()
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.time() - wall
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    status = state.read_json(os.path.join(source, "build", state.STATUS_NAME)) or {}
    return {"wall": wall, "cpu": cpu, "samples": len(status.get("timeline") or []), "attempts": len(result["attempts"]),
            "confinement": result["confinement"].get("strategy")}


def main():
    info = benchlib.machine()
    iterations = benchlib.env_int("GPUFLEET_BENCH_TIMELINE_ITERATIONS", 2000, 50)
    steps = benchlib.env_int("GPUFLEET_BENCH_STEPS", 24, 4)
    interval = 0.5
    directory = tempfile.mkdtemp(prefix="gpufleet-timeline-bench-")
    try:
        os.chmod(directory, 0o700)
        costs = micro(iterations, directory)
        build = real_build(directory, interval, steps)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if build["samples"] < 2:
        raise benchlib.BenchFailure("the build's status file kept %d timeline samples" % build["samples"])
    share_default = 100.0 * costs["per_interval"] / 2.0
    share_fast = 100.0 * costs["per_interval"] / interval
    loop = 100.0 * build["cpu"] / build["wall"]
    rows = [
        ["Timeline.add (at the %d-sample bound)" % DEFAULT_CAPACITY, "%.1f us" % (costs["add"] * 1e6), "-"],
        ["status file write without the timeline", "%.1f us" % (costs["write_without"] * 1e6), "-"],
        ["status file write with the timeline (%d samples, %d bytes)" % (costs["samples"], costs["status_bytes_with"]),
         "%.1f us" % (costs["write_with"] * 1e6), "-"],
        ["the timeline per interval (add + the longer write)", "%.1f us" % (costs["per_interval"] * 1e6),
         "%.3f%% at 2 s (default), %.3f%% at %.1f s" % (share_default, share_fast, interval)],
        ["guarded_build's whole watching loop, real build (%d steps, %s, %d samples)" % (
            steps, build["confinement"], build["samples"]), "%.2f s CPU in %.1f s" % (build["cpu"], build["wall"]),
         "%.2f%% at %.1f s" % (loop, interval)],
    ]
    table = benchlib.markdown_table(["what", "CPU", "of one core"], rows)
    targets = [("the timeline's sampling under 1% of one core", share_fast < 1.0,
                "%.3f%% at a %.1f s interval, %.3f%% at the default 2 s" % (share_fast, interval, share_default))]
    notes = ["CPU is process time (user + system) of this Python process; the build's compilers are its children and "
             "not counted", "micro costs are means over %d iterations" % iterations]
    return benchlib.report("timeline_cpu", "What the memory timeline costs a guarded build", info, table, notes,
                           {"micro": costs, "build": build, "interval": interval}, targets)


if __name__ == "__main__":
    benchlib.main_wrapper(main)
