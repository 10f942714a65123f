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
from fleetlib import Fleet, cgroup_pids, parse_adhoc_status, run_adhoc, run_playbook

PLAYBOOK = os.path.join(benchlib.REPO_ROOT, "playbooks", "preflight.yml")


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def node_cpu_seconds(fleet):
    """CPU seconds of everything in the nodes' cgroups: own time plus that of reaped children (sshd sessions,
    the modules they ran), from /proc/<pid>/stat fields utime, stime, cutime, cstime."""
    ticks = float(os.sysconf("SC_CLK_TCK"))
    total = 0.0
    for node in fleet.nodes:
        for pid in cgroup_pids(node.cgroup_dir):
            try:
                with open("/proc/%d/stat" % pid) as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except (IOError, OSError, IndexError):
                continue  # gone meanwhile
            total += sum(int(x) for x in fields[11:15]) / ticks
    return total


def measure(fleet, run):
    """Run once: (result, controller CPU s, node-side CPU s, machine busy CPU s, load average 1 min after)."""
    cpu, nodes, busy = children_cpu_seconds(), node_cpu_seconds(fleet), benchlib.cpu_busy_seconds()
    result = run()
    return (result, children_cpu_seconds() - cpu, node_cpu_seconds(fleet) - nodes, benchlib.cpu_busy_seconds() - busy,
            os.getloadavg()[0])


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
                result, cpu, node_cpu, busy, load = measure(fleet, run)
                rows[key].append({"wall": result.duration, "controller_cpu": cpu, "node_cpu": node_cpu, "busy_cpu": busy,
                                  "load1": load})
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
        own = (med(pre, "controller_cpu") + med(pre, "node_cpu")) / wall
        rows.append([nodes, benchlib.fmt_seconds(wall), benchlib.fmt_seconds(per_host[nodes]), benchlib.fmt_seconds(med(ping, "wall")),
                     benchlib.fmt_ratio(wall / med(ping, "wall")), benchlib.fmt_seconds(med(pre, "controller_cpu")),
                     benchlib.fmt_seconds(med(pre, "node_cpu")), "%.2f" % own, "%.0f%%" % (100 * busy), "%.2f" % med(pre, "load1")])
    table = benchlib.markdown_table(["nodes (forks = nodes)", "preflight median s", "per host s", "ping median s", "preflight vs ping",
                                     "controller CPU s", "node-side CPU s", "cores kept busy", "machine busy", "load (1 min)"], rows)
    notes = ["medians over %d runs per size after one warm-up run; profiles `[]` (memory + build processes), reports written" % repeat,
             "controller CPU = user + system time of ansible-playbook, its forks and its ssh clients; node-side CPU = sshd "
             "sessions and the modules they ran, in the nodes' cgroups; cores kept busy = (controller + node-side CPU) / wall, "
             "out of %d; machine busy = non-idle CPU time of all cores over wall x cores, anyone else's work included" % cores]
    slopes = []
    for small, big in zip(sizes, sizes[1:]):
        slope = (med(results[big]["preflight"], "wall") - med(results[small]["preflight"], "wall")) / (big - small)
        slopes.append("%d->%d: %.3fs" % (small, big, slope))
    if slopes:
        notes.append("marginal cost per added host (difference of medians / added hosts): " + ", ".join(slopes))

    def own_cores(n):
        pre = results[n]["preflight"]
        return (med(pre, "controller_cpu") + med(pre, "node_cpu")) / med(pre, "wall")
    saturated = [n for n in sizes if own_cores(n) >= 0.8 * cores]
    per_host_cpu = ["%d: %.2fs" % (n, (med(results[n]["preflight"], "controller_cpu") + med(results[n]["preflight"], "node_cpu")) / n)
                    for n in sizes]
    notes.append("CPU (controller + node side) per host: %s" % ", ".join(per_host_cpu))
    if saturated:
        notes.append("from %d nodes on the run alone keeps >= 80%% of the %d cores busy: there the machine, not Ansible's forks, "
                     "sets the wall time (it grows with CPU work per host)" % (saturated[0], cores))
    else:
        busiest = max(sizes, key=own_cores)
        notes.append("the run alone never kept 80%% of the %d cores busy (most: %.2f cores at %d nodes); where 'machine busy' is "
                     "near 100%% anyway, other work on the machine took the rest" % (cores, own_cores(busiest), busiest))
    targets = []
    if 8 in per_host and 32 in per_host:
        ratio = per_host[32] / per_host[8]
        targets.append(("per-host cost 8 -> 32 nodes within 1.3x", ratio <= 1.3, "%.2fx (%.3fs -> %.3fs per host)" % (ratio, per_host[8], per_host[32])))
    return benchlib.report("scale", "Preflight wall time by fleet size", info, table, notes,
                           {"sizes": sizes, "repeat": repeat, "runs": results, "per_host": per_host}, targets)


if __name__ == "__main__":
    benchlib.main_wrapper(main)
