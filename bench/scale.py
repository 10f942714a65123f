#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark 3: preflight wall time at 4, 8, 16 and 32 nodes (forks = nodes), with ping beside it.

For each fleet size: medians over R runs of ``ansible-playbook playbooks/preflight.yml`` (profiles ``[]``)
and ``ansible all -m ping``, both with ``-f <nodes>``.  Per-host cost is wall / nodes; the target is
that it grows at most 1.3 x from 8 to 32 nodes.  Every node is on this one machine, so the controller,
its ssh clients, 32 sshds and 32 module runs share its cores: the table shows the controller's CPU
time (ansible-playbook, its workers, ssh clients) and how busy the whole machine was during the run
(busy CPU seconds / (wall x cores), from /proc/stat): near 100% the machine, not Ansible, is the limit.
Knobs: GPUFLEET_BENCH_SIZES (4,8,16,32), GPUFLEET_BENCH_REPEAT (3).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import resource
import shutil
import tempfile
import time

import benchlib
from benchlib import BenchFailure
from fleetlib import Fleet, parse_adhoc_status, run_adhoc, run_playbook

PLAYBOOK = os.path.join(benchlib.REPO_ROOT, "playbooks", "preflight.yml")


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(run):
    """Run once: (result, controller CPU seconds, machine busy CPU seconds, load average 1 min after)."""
    cpu, busy = children_cpu_seconds(), benchlib.cpu_busy_seconds()
    result = run()
    return result, children_cpu_seconds() - cpu, benchlib.cpu_busy_seconds() - busy, os.getloadavg()[0]


def one_size(nodes, repeat, report_dir):
    fleet = Fleet()
    rows = {"preflight": [], "ping": []}
    try:
        fleet.start(nodes)
        hosts = [node.name for node in fleet.nodes]
        forks = ["-f", str(nodes)]
        extra = {"preflight_profiles": [], "preflight_report_dir": report_dir, "preflight_min_available_memory": "512MiB"}

        def preflight():
            result = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars=extra, args=forks)
            if result.rc != 0:
                raise BenchFailure("preflight on %d nodes: rc %d\n%s\n%s" % (nodes, result.rc, benchlib.tail(result.stdout),
                                                                             benchlib.tail(result.stderr)))
            return result

        def ping():
            result = run_adhoc("all", fleet.inventory_path, "ansible.builtin.ping", args=forks)
            statuses = parse_adhoc_status(result.stdout)
            if result.rc != 0 or any(statuses.get(h) != "SUCCESS" for h in hosts):
                raise BenchFailure("ping on %d nodes: rc %d\n%s" % (nodes, result.rc, benchlib.tail(result.stdout)))
            return result

        preflight()
        ping()  # warm-up: ssh masters open, caches warm
        for _round in range(repeat):
            for key, run in (("preflight", preflight), ("ping", ping)):
                result, cpu, busy, load = measure(run)
                rows[key].append({"wall": result.duration, "controller_cpu": cpu, "busy_cpu": busy, "load1": load})
        started = fleet.timings.get("start_seconds")
    finally:
        fleet.stop()
    return rows, started


def med(runs, field):
    return benchlib.median([run[field] for run in runs])


def main():
    sizes = benchlib.env_list("GPUFLEET_BENCH_SIZES", (4, 8, 16, 32), (1, 2))
    repeat = benchlib.env_int("GPUFLEET_BENCH_REPEAT", 3, 1)
    cores = os.cpu_count() or 1
    info = benchlib.machine()
    info["load_average"] = benchlib.wait_for_low_load()
    report_dir = tempfile.mkdtemp(prefix="gpufleet-bench-reports-")
    results = {}
    try:
        for nodes in sizes:
            started = time.monotonic()
            results[nodes], fleet_start = one_size(nodes, repeat, report_dir)
            print("%d nodes: preflight %.2fs, ping %.2fs (fleet up in %.1fs, %.0fs in all; load %.2f)"
                  % (nodes, med(results[nodes]["preflight"], "wall"), med(results[nodes]["ping"], "wall"), fleet_start,
                     time.monotonic() - started, os.getloadavg()[0]), flush=True)
    finally:
        shutil.rmtree(report_dir, ignore_errors=True)

    rows = []
    per_host = {}
    for nodes in sizes:
        pre, ping = results[nodes]["preflight"], results[nodes]["ping"]
        wall = med(pre, "wall")
        per_host[nodes] = wall / nodes
        busy = med(pre, "busy_cpu") / (wall * cores)
        rows.append([nodes, benchlib.fmt_seconds(wall), benchlib.fmt_seconds(per_host[nodes]), benchlib.fmt_seconds(med(ping, "wall")),
                     benchlib.fmt_ratio(wall / med(ping, "wall")), benchlib.fmt_seconds(med(pre, "controller_cpu")),
                     "%.0f%%" % (100 * busy), "%.2f" % med(pre, "load1")])
    table = benchlib.markdown_table(["nodes (forks = nodes)", "preflight median s", "per host s", "ping median s", "preflight vs ping",
                                     "controller CPU s", "machine busy", "load (1 min)"], rows)
    notes = ["medians over %d runs per size after one warm-up run; profiles `[]` (memory + build processes), reports written" % repeat,
             "controller CPU = user + system time of ansible-playbook, its forks and its ssh clients; machine busy = non-idle "
             "CPU time of all %d cores over wall x cores (node-side sshd and modules, and anyone else's work, included)" % cores]
    slopes = []
    for small, big in zip(sizes, sizes[1:]):
        slope = (med(results[big]["preflight"], "wall") - med(results[small]["preflight"], "wall")) / (big - small)
        slopes.append("%d->%d: %.3fs" % (small, big, slope))
    if slopes:
        notes.append("marginal cost per added host (difference of medians / added hosts): " + ", ".join(slopes))
    busiest = max(sizes, key=lambda n: med(results[n]["preflight"], "busy_cpu") / (med(results[n]["preflight"], "wall") * cores))
    notes.append("the machine is the limit where 'machine busy' nears 100%%: from %d nodes on here (most busy: %d nodes); past that, "
                 "wall time grows with the CPU work per host, not with Ansible's forks" % (
                     min([n for n in sizes if med(results[n]["preflight"], "busy_cpu") / (med(results[n]["preflight"], "wall") * cores) >= 0.9]
                         or [busiest]), busiest))
    targets = []
    if 8 in per_host and 32 in per_host:
        ratio = per_host[32] / per_host[8]
        targets.append(("per-host cost 8 -> 32 nodes within 1.3x", ratio <= 1.3, "%.2fx (%.3fs -> %.3fs per host)" % (ratio, per_host[8], per_host[32])))
    return benchlib.report("scale", "Preflight wall time by fleet size", info, table, notes,
                           {"sizes": sizes, "repeat": repeat, "runs": results, "per_host": per_host}, targets)


if __name__ == "__main__":
    benchlib.main_wrapper(main)
