# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one run of the node-local health check costs (issue 19 item 2): it must be cheap enough to run every minute
(Slurm's HealthCheckInterval, a timer, node-problem-detector's default 1 min period) and far inside slurmd's 60 s kill.

The program exactly as the health_check role installs it: the zip application from ``health_check_bundle``, run by
``/usr/bin/python3 -I`` with an empty environment (as slurmd runs it), with its JSON config. Per policy:
wall seconds and CPU seconds (user + system of the child, ``RUSAGE_CHILDREN``), median over the runs.

- ``memory + processes``: ``profiles: []`` (the checks every policy has);
- ``build``: toolchain (cmake, ninja, nvcc ``--list-gpu-arch``, gcc, torch), disks, kernel log;
- ``build + gpu`` (the default): also nvidia-smi -- on this machine there is none, so its ``not found`` is cheap;
  on a GPU node nvidia-smi itself adds its own time (typically 0.1 - 0.5 s).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import resource
import subprocess
import tempfile
import time

import benchlib
from ansible_collections.gpufleet.preflight.plugins.action import health_check_bundle

PYTHON = "/usr/bin/python3"
POLICIES = (
    ("memory + processes", {"profiles": [], "max_build_processes": 100000, "min_available_memory": "1MiB"}),
    ("build", {"profiles": ["build"], "max_build_processes": 100000, "min_available_memory": "1MiB"}),
    ("build + gpu (default profiles)", {"max_build_processes": 100000, "min_available_memory": "1MiB"}),
)


def one_run(pyz, config):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run([PYTHON, "-I", pyz, "--config", config, "--mode", "npd"], env={}, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60, check=False)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    first = proc.stdout.decode("utf-8", "replace").splitlines()[:1]
    if proc.returncode not in (0, 1, 2) or not first or len(first[0]) > 80:
        raise benchlib.BenchFailure("health check broke: rc %s, output %r, stderr %s"
                                    % (proc.returncode, proc.stdout[-500:], benchlib.tail(proc.stderr.decode())))
    return wall, cpu, proc.returncode, first[0]


def main():
    runs = benchlib.env_int("GPUFLEET_BENCH_HEALTH_CHECK_RUNS", 10, 2)
    info = benchlib.machine()
    benchlib.wait_for_low_load()
    data, modules = health_check_bundle.bundle_bytes()
    rows, results = [], {}
    workdir = tempfile.mkdtemp(prefix="gpufleet-bench-hc-")
    try:
        pyz = os.path.join(workdir, "health_check.pyz")
        with open(pyz, "wb") as handle:
            handle.write(data)
        for label, policy in POLICIES:
            config = os.path.join(workdir, "config.json")
            with open(config, "w") as handle:
                json.dump({"policy": policy}, handle)
            samples = [one_run(pyz, config) for _index in range(runs)]
            wall = benchlib.median([s[0] for s in samples])
            cpu = benchlib.median([s[1] for s in samples])
            results[label] = dict(wall_seconds=wall, cpu_seconds=cpu, runs=runs, exit_codes=sorted(set(s[2] for s in samples)),
                                  first_line=samples[-1][3])
            rows.append([label, runs, benchlib.fmt_seconds(wall), benchlib.fmt_seconds(cpu),
                         "%.2f%%" % (100.0 * cpu / 60.0), ", ".join(str(c) for c in results[label]["exit_codes"])])
    finally:
        for name in os.listdir(workdir):
            os.unlink(os.path.join(workdir, name))
        os.rmdir(workdir)
    table = benchlib.markdown_table(["policy", "runs", "wall s (median)", "CPU s (median)", "CPU share of one core, "
                                     "run every minute", "exit codes"], rows)
    worst = max(r["wall_seconds"] for r in results.values())
    notes = ["the zip application: %d bytes, %d modules; run as slurmd runs it (`python3 -I`, empty environment)"
             % (len(data), len(modules))]
    return benchlib.report("health_check", "Node-local health check: time per run", info, table, notes,
                           dict(results=results, bundle_bytes=len(data)),
                           [("every run under 10 s wall (slurmd kills at 60 s)", worst < 10, "worst median %.2f s" % worst)])


if __name__ == "__main__":
    benchlib.main_wrapper(main)
