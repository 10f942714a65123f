#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark 2: the build_processes scan with thousands of live processes vs the seed's ps | grep.

A one-node test fleet gives a PID namespace of our own (its own /proc), so nothing else running on
this machine -- other people's builds, a pytest whose command line says "ninja" -- enters the count.
In it: P live processes (default 5,000), K of them (default 20) a copy of /bin/sleep named ``ninja``,
the rest plain ``sleep``.  Both ways must count exactly K:

- in-process: ``collect_build_processes()`` (what node_facts runs for gather_subset=build_processes)
  vs ``sh -c 'ps aux | grep -E "cmake|ninja|cc1plus|nvcc" | grep -v grep | wc -l'`` (bench/scan_probe.py);
- through Ansible, on the node: ``ansible localhost -m gpufleet.preflight.node_facts -a gather_subset=build_processes``
  vs ``ansible localhost -m ansible.builtin.shell -a '<the same pipeline>'``.

The processes die with the node (its namespace init is killed by Fleet.stop(), also on Ctrl-C or
SIGTERM; a run killed outright is reaped by the next fleet's start()).  Target: scan <= 2 x ps | grep.
Knobs: GPUFLEET_BENCH_PROCESSES (5000), GPUFLEET_BENCH_NINJAS (20), GPUFLEET_BENCH_REPEAT (5).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shlex
import shutil
import sys
import time

import benchlib
from benchlib import BenchFailure
from fleetlib import COLLECTIONS_PATH, Fleet

ADHOC_RE = re.compile(r"^localhost \| ([A-Z]+)(?: \| rc=\d+)? (?:=> |>>\n)(.*)", re.M | re.S)
PROBE = os.path.join(benchlib.BENCH_DIR, "scan_probe.py")
PYTHON = sys.executable
ANSIBLE = os.path.join(benchlib.REPO_ROOT, ".venv", "bin", "ansible")

# The launcher names no build tool on its command line (the ninja copy's path is inside the file).
SPAWN_SCRIPT = """#!/bin/sh
n=0
while [ $n -lt {ninjas} ]; do {ninja} {seconds} </dev/null >/dev/null 2>&1 & n=$((n+1)); done
while [ $n -lt {total} ]; do sleep {seconds} </dev/null >/dev/null 2>&1 & n=$((n+1)); done
wait
"""


def spawn(fleet, node, total, ninjas, seconds=900, timeout=300):
    """Start `total` sleepers in the node (`ninjas` of them named ninja); wait until all are alive."""
    ninja = os.path.join(fleet.bin_dir, "ninja")
    shutil.copy2("/bin/sleep", ninja)
    script = os.path.join(fleet.dir, "spawn.sh")
    with open(script, "w") as handle:
        handle.write(SPAWN_SCRIPT.format(ninjas=ninjas, ninja=shlex.quote(ninja), total=total, seconds=seconds))
    started = time.monotonic()
    node.run("setsid sh %s </dev/null >/dev/null 2>&1 &" % shlex.quote(script), check=True)
    deadline = started + timeout
    while True:
        alive = int(node.run("ls /proc | grep -c '^[0-9]'", check=True).stdout.strip())
        if alive >= total:
            return alive, time.monotonic() - started
        if time.monotonic() > deadline:
            raise BenchFailure("only %d of %d processes alive in %s after %ds" % (alive, total, node.name, timeout))
        time.sleep(0.5)


def ansible_in_node(fleet, node, module, module_args, label):
    """Run `ansible localhost -m module` inside the node, timed there; (seconds, parsed json result)."""
    out_file = os.path.join(fleet.dir, "adhoc.json")
    env = ("ANSIBLE_CONFIG=%s ANSIBLE_COLLECTIONS_PATH=%s ANSIBLE_STDOUT_CALLBACK=ansible.builtin.minimal ANSIBLE_NOCOLOR=1 "
           "ANSIBLE_DEPRECATION_WARNINGS=0" % (shlex.quote(os.path.join(benchlib.REPO_ROOT, "ansible.cfg")), shlex.quote(COLLECTIONS_PATH)))
    cmd = ("cd %s && s=$(date +%%s%%N) && %s %s localhost -m %s -a %s >%s; rc=$?; e=$(date +%%s%%N); echo $rc $((e - s))"
           % (shlex.quote(benchlib.REPO_ROOT), env, shlex.quote(ANSIBLE), module, shlex.quote(module_args), shlex.quote(out_file)))
    result = node.run(cmd, timeout=300)
    output = ""
    try:
        rc, nanos = [int(x) for x in result.stdout.split()]
        with open(out_file) as handle:
            output = handle.read()
        # minimal callback: "localhost | SUCCESS => {json}" or, for shell, "localhost | CHANGED | rc=0 >>\n<stdout>"
        match = ADHOC_RE.search(output)
        if not match or match.group(1) not in ("SUCCESS", "CHANGED"):
            raise ValueError("no success line")
        body = match.group(2)
        host = json.loads(body) if body.startswith("{") else {"stdout": body}
    except (ValueError, IOError) as exc:
        raise BenchFailure("%s in %s: cannot read the result (%s): %s %s %s" % (label, node.name, exc, result.stdout, result.stderr, output))
    if rc != 0:
        raise BenchFailure("%s in %s: rc %d: %s" % (label, node.name, rc, output))
    return nanos / 1e9, host


def main():
    total = benchlib.env_int("GPUFLEET_BENCH_PROCESSES", 5000, 200)
    ninjas = benchlib.env_int("GPUFLEET_BENCH_NINJAS", 20, 20)
    repeat = benchlib.env_int("GPUFLEET_BENCH_REPEAT", 5, 1)
    if not 0 < ninjas < total:
        raise BenchFailure("need 0 < GPUFLEET_BENCH_NINJAS < GPUFLEET_BENCH_PROCESSES, got %d and %d" % (ninjas, total))
    info = benchlib.machine()
    info["load_average"] = benchlib.wait_for_low_load()
    fleet = Fleet()
    samples = {"scan_in_process": [], "grep_in_process": [], "node_facts_adhoc": [], "shell_grep_adhoc": []}
    counts = {"scan_in_process": set(), "grep_in_process": set(), "node_facts_adhoc": set(), "shell_grep_adhoc": set(),
              "scan_ninja_by_name": set()}
    try:
        fleet.start(1)
        node = fleet.nodes[0]
        alive, spawn_seconds = spawn(fleet, node, total, ninjas)
        print("%d processes alive in %s (%d named ninja), spawned in %.1fs" % (alive, node.name, ninjas, spawn_seconds), flush=True)
        probe_argv = "%s %s %d" % (shlex.quote(PYTHON), shlex.quote(PROBE), repeat)
        # Warm-up (page cache, pyc) once, then the measured rounds.
        node.run(probe_argv, check=True, timeout=300)
        probe = json.loads(node.run(probe_argv, check=True, timeout=300).stdout)
        samples["scan_in_process"] = probe["scan_seconds"]
        samples["grep_in_process"] = probe["grep_seconds"]
        counts["scan_in_process"].update(probe["scan_counts"])
        counts["grep_in_process"].update(probe["grep_counts"])
        counts["scan_ninja_by_name"].add(probe["by_name"].get("ninja", 0))
        scanned = max(probe["scanned"])
        for round_no in range(repeat + 1):
            seconds, host = ansible_in_node(fleet, node, "gpufleet.preflight.node_facts", "gather_subset=build_processes", "node_facts")
            if round_no:
                samples["node_facts_adhoc"].append(seconds)
            counts["node_facts_adhoc"].add(host["ansible_facts"]["gpufleet_build_processes"]["count"])
            seconds, host = ansible_in_node(fleet, node, "ansible.builtin.shell", benchlib.SEED_GREP, "shell")
            if round_no:
                samples["shell_grep_adhoc"].append(seconds)
            counts["shell_grep_adhoc"].add(int(host["stdout"].strip()))
    finally:
        fleet.stop()

    disagree = dict((key, sorted(values)) for key, values in counts.items() if values != {ninjas})
    medians = dict((key, benchlib.median(values)) for key, values in samples.items())
    scan_ratio = medians["scan_in_process"] / medians["grep_in_process"]
    module_ratio = medians["node_facts_adhoc"] / medians["shell_grep_adhoc"]
    rows = [
        ["`collect_build_processes()` in-process (node_facts' build_processes collector)",
         benchlib.fmt_seconds(medians["scan_in_process"]), benchlib.fmt_ratio(scan_ratio), ",".join(map(str, sorted(counts["scan_in_process"])))],
        ["`sh -c '%s'`" % benchlib.SEED_GREP.replace("|", "\\|"), benchlib.fmt_seconds(medians["grep_in_process"]), "1.00x",
         ",".join(map(str, sorted(counts["grep_in_process"])))],
        ["`ansible localhost -m gpufleet.preflight.node_facts -a gather_subset=build_processes`",
         benchlib.fmt_seconds(medians["node_facts_adhoc"]), benchlib.fmt_ratio(module_ratio), ",".join(map(str, sorted(counts["node_facts_adhoc"])))],
        ["`ansible localhost -m ansible.builtin.shell -a '<the same ps \\| grep>'`", benchlib.fmt_seconds(medians["shell_grep_adhoc"]), "1.00x",
         ",".join(map(str, sorted(counts["shell_grep_adhoc"])))],
    ]
    table = benchlib.markdown_table(["%d live processes (%d scanned), %d named ninja" % (alive, scanned, ninjas), "median s",
                                     "vs ps \\| grep", "count"], rows)
    targets = [("scan <= 2 x ps | grep (in-process)", scan_ratio <= 2.0, "%.2fx" % scan_ratio),
               ("node_facts module <= 2 x shell ps | grep (through ansible)", module_ratio <= 2.0, "%.2fx" % module_ratio),
               ("same count (%d) everywhere" % ninjas, not disagree, "disagreeing: %s" % disagree if disagree else "all %d" % ninjas, True)]
    notes = ["medians over %d rounds after one warm-up; in-process times are measured inside the node, the ansible ones "
             "around the `ansible` command inside the node (start-up included)" % repeat,
             "the ninja copies (children of a launcher whose command line names no build tool) sit among plain `sleep`s; "
             "ps | grep counts them by command line, the scan by executable name: both must say %d" % ninjas]
    code = benchlib.report("process_scan", "Build-process scan vs ps | grep (%d processes)" % total, info, table, notes,
                           {"processes": total, "alive": alive, "ninjas": ninjas, "repeat": repeat, "samples": samples,
                            "medians": medians, "counts": dict((k, sorted(v)) for k, v in counts.items())}, targets)
    if disagree:
        raise BenchFailure("counts disagree (expected %d everywhere): %s" % (ninjas, disagree))
    return code


if __name__ == "__main__":
    benchlib.main_wrapper(main)
