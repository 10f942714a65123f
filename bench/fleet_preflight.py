#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark 1: the fleet preflight against Ansible's own floor and the seed's ssh one-liner.

On an N-node test fleet (real sshd per node, tests/tools/fleetlib.py), medians over R rounds of:

- ``ansible all -m ping``                                  (the floor: one module round trip per host)
- ``ansible all -m setup -a gather_subset=hardware``       (what people use for memory facts today)
- ``ansible-playbook playbooks/preflight.yml`` with its default profiles ``[build, gpu]`` (every node has a stub
  ``nvidia-smi`` replaying 8 healthy Blackwell GPUs), with ``[]`` (memory + build processes) and with ``[build]``
- the seed's ``ssh root@node 'free -h; ps aux | grep ... | wc -l'`` to every node at once, with a
  fresh ssh connection each (cold) and over a ControlMaster opened beforehand (warm).

Every round runs every command once, in the same order, so slow minutes hit all of them alike.
Targets: preflight <= 1.5 x ping and < setup.  Knobs: GPUFLEET_BENCH_NODES (8), GPUFLEET_BENCH_REPEAT (5),
GPUFLEET_BENCH_COMMANDS (comma-separated keys of the commands to time, e.g. ``setup_hardware,preflight_default``;
ping always runs; unset: all).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import json
import os
import re
import shutil
import tempfile
import time

import benchlib
from benchlib import BenchFailure
from fleetlib import Fleet, install_gpus, parse_adhoc_status, run_adhoc, run_playbook

PLAYBOOK = os.path.join(benchlib.REPO_ROOT, "playbooks", "preflight.yml")
STAMP_PLUGINS = os.path.join(benchlib.BENCH_DIR, "callback_plugins")
RECAP_RE = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def preflight_vars(profiles, report_dir, write_reports=True):
    """Variables under which a healthy test node is ready (so the happy path is what is timed)."""
    extra = {} if profiles is None else {"preflight_profiles": profiles}  # None: the role's default profiles
    return dict(extra, **{
        "preflight_write_reports": write_reports,
        "preflight_report_dir": report_dir,
        "preflight_min_available_memory": "512MiB",
        "preflight_min_free_disk": "512MiB",
        "preflight_min_free_inodes": 1000,
        "preflight_build_path": "/tmp",
    })


def check_playbook(label, result, hosts):
    recap = {m.group(1): (int(m.group(4)), int(m.group(5))) for m in RECAP_RE.finditer(result.stdout)}
    broken = [h for h in hosts if recap.get(h, (1, 1)) != (0, 0)]
    if result.rc != 0 or broken:
        raise BenchFailure("%s: rc %d, hosts not ok %s\n%s\n%s"
                           % (label, result.rc, broken, benchlib.tail(result.stdout), benchlib.tail(result.stderr)))


def check_adhoc(label, result, hosts):
    statuses = parse_adhoc_status(result.stdout)
    broken = [h for h in hosts if statuses.get(h) != "SUCCESS"]
    if result.rc != 0 or broken:
        raise BenchFailure("%s: rc %d, hosts not SUCCESS %s\n%s\n%s"
                           % (label, result.rc, broken, benchlib.tail(result.stdout), benchlib.tail(result.stderr)))


def ssh_argv(fleet, node, warm):
    argv = ["ssh", "-i", fleet.client_key, "-l", "root", "-p", str(node.port),
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]
    if warm:
        # Under the fleet dir, where Fleet.stop() ends the masters.
        argv += ["-o", "ControlMaster=auto", "-o", "ControlPersist=120s", "-o", "ControlPath=%s/cp-raw-%%C" % fleet.dir]
    else:
        argv += ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
    return argv + [node.address, benchlib.SEED_ONE_LINER]


def run_one_liner(fleet, warm):
    seconds, results = benchlib.timed_parallel([ssh_argv(fleet, node, warm) for node in fleet.nodes])
    for node, (rc, out, err) in zip(fleet.nodes, results):
        lines = out.strip().splitlines()
        if rc != 0 or "Mem:" not in out or not lines or not lines[-1].strip().isdigit():
            raise BenchFailure("seed one-liner on %s: rc %d\n%s\n%s" % (node.name, rc, out, err))
    return seconds


def segments(stamp_file, started, finished):
    """Seconds per phase of one playbook run, from the stamp callback: startup, each task, shutdown."""
    with open(stamp_file) as handle:
        events = [json.loads(line) for line in handle if line.strip()]
    os.unlink(stamp_file)
    spent = collections.OrderedDict()
    if not events:
        return spent
    spent["(start-up: python, ansible, inventory, playbook parse)"] = events[0]["t"] - started
    play = ""
    for event, following in zip(events, events[1:] + [{"t": finished, "kind": "exit", "name": ""}]):
        if event["kind"] == "play":
            play = event["name"]
            key = "%s: (play start)" % play
        elif event["kind"] == "task":
            key = "%s: %s" % (play, event["name"])
        elif event["kind"] == "end":
            key = "(stats, shutdown)"
        else:
            continue
        spent[key] = spent.get(key, 0.0) + following["t"] - event["t"]
    return spent


def commands(fleet, report_dir, breakdown):
    """(key, label, callable -> seconds) for each thing timed."""
    hosts = [node.name for node in fleet.nodes]
    inventory = fleet.inventory_path

    def ping():
        result = run_adhoc("all", inventory, "ansible.builtin.ping")
        check_adhoc("ping", result, hosts)
        return result.duration

    def setup():
        result = run_adhoc("all", inventory, "ansible.builtin.setup", "gather_subset=hardware")
        check_adhoc("setup", result, hosts)
        return result.duration

    def preflight(profiles, key, write_reports=True, extra_env=None):
        def _run():
            stamp_file = os.path.join(report_dir, "stamps.jsonl")
            env = {"ANSIBLE_CALLBACK_PLUGINS": STAMP_PLUGINS, "ANSIBLE_CALLBACKS_ENABLED": "gpufleet_bench_stamp",
                   "GPUFLEET_BENCH_STAMP_FILE": stamp_file}
            env.update(extra_env or {})
            report = os.path.join(report_dir, "preflight.json")
            if os.path.exists(report):
                os.unlink(report)
            started = time.time()
            result = run_playbook(PLAYBOOK, inventory, extra_vars=preflight_vars(profiles, report_dir, write_reports), env=env)
            check_playbook("preflight %s" % profiles, result, hosts)
            breakdown.setdefault(key, []).append(segments(stamp_file, started, started + result.duration))
            if write_reports:
                with open(report) as handle:
                    summary = json.load(handle)["summary"]
                if summary.get("ready") != len(hosts):
                    raise BenchFailure("preflight %s: not every healthy node is ready: %s" % (profiles, summary))
            return result.duration
        return _run

    return [
        ("ping", "`ansible all -m ping`", ping),
        ("setup_hardware", "`ansible all -m setup -a gather_subset=hardware`", setup),
        ("preflight_default", "`ansible-playbook playbooks/preflight.yml` (the default profiles `[build, gpu]`)",
         preflight(None, "preflight_default")),
        ("preflight", "`ansible-playbook playbooks/preflight.yml` (profiles `[]`: memory + build processes)", preflight([], "preflight")),
        ("preflight_build", "`ansible-playbook playbooks/preflight.yml` (profiles `[build]`)", preflight(["build"], "preflight_build")),
        ("preflight_no_reports", "the same, profiles `[]`, `preflight_write_reports=false`",
         preflight([], "preflight_no_reports", write_reports=False)),
        ("preflight_no_pipelining", "the same, profiles `[]`, `ANSIBLE_PIPELINING=False` (the shipped ansible.cfg turns it on)",
         preflight([], "preflight_no_pipelining", extra_env={"ANSIBLE_PIPELINING": "False"})),
        ("seed_ssh_cold", "seed one-liner, parallel `ssh` per node, no connection reuse", lambda: run_one_liner(fleet, False)),
        ("seed_ssh_warm", "seed one-liner, parallel `ssh` over an open ControlMaster", lambda: run_one_liner(fleet, True)),
    ]


def selected(timed, wanted):
    """The commands named in GPUFLEET_BENCH_COMMANDS (comma-separated keys; ping always), or all of them."""
    keys = set(key.strip() for key in wanted.split(",") if key.strip())
    unknown = keys - set(key for key, _label, _run in timed)
    if unknown:
        raise BenchFailure("GPUFLEET_BENCH_COMMANDS: no command %s (known: %s)" % (
            ", ".join(sorted(unknown)), ", ".join(key for key, _label, _run in timed)))
    return [entry for entry in timed if not keys or entry[0] in keys or entry[0] == "ping"]


def breakdown_table(runs, ping):
    keys = []
    for run in runs:
        keys.extend(key for key in run if key not in keys)
    rows = []
    for key in keys:
        value = benchlib.median([run.get(key, 0.0) for run in runs])
        rows.append([key, benchlib.fmt_seconds(value), benchlib.fmt_ratio(value / ping)])
    return benchlib.markdown_table(["phase (play: task)", "median s", "as a share of ping"], rows)


def main():
    nodes = benchlib.env_int("GPUFLEET_BENCH_NODES", 8, 2)
    repeat = benchlib.env_int("GPUFLEET_BENCH_REPEAT", 5, 1)
    if shutil.which("ssh") is None:
        raise BenchFailure("ssh is not installed")
    # As on a default Python: the controller's plugins load from __pycache__ after the warm-up round. A sandbox that
    # sets PYTHONDONTWRITEBYTECODE made every worker compile the collection's controller code again (about 0.14
    # CPU-s an 8-node run), a cost no installed controller pays. The nodes never write bytecode (AnsiballZ zips).
    bytecode_was_off = os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None
    info = benchlib.machine()
    info["load_average"] = benchlib.wait_for_low_load()
    report_dir = tempfile.mkdtemp(prefix="gpufleet-bench-reports-")
    meter = benchlib.CpuMeter()  # before the fleet starts, so its nodes' CPU counts as well
    cpu = {}
    fleet = Fleet()
    try:
        fleet.start(nodes)
        for node in fleet.nodes:
            # The gpu profile's happy path: 8 healthy Blackwell GPUs from the captured-output stub.
            install_gpus(node)
        breakdown = {}
        timed = selected(commands(fleet, report_dir, breakdown), os.environ.get("GPUFLEET_BENCH_COMMANDS", ""))
        print("fleet of %d nodes up in %.1fs; warm-up round (not counted)" % (nodes, fleet.timings["start_seconds"]), flush=True)
        for _key, _label, run in timed:
            run()
        breakdown.clear()
        samples = {key: [] for key, _label, _run in timed}
        for round_no in range(1, repeat + 1):
            for key, _label, run in timed:
                before = meter.seconds()
                samples[key].append(run())
                if before is not None:
                    cpu.setdefault(key, []).append(meter.seconds() - before)
            spent = ", ".join("%s %.2fs" % (k, samples[k][-1]) for k, _l, _r in timed)
            print("round %d/%d: %s (load %s)" % (round_no, repeat, spent, benchlib.load_average()[0]), flush=True)
    finally:
        fleet.stop()
        meter.close()
        shutil.rmtree(report_dir, ignore_errors=True)

    medians = {key: benchlib.median(values) for key, values in samples.items()}
    ping = medians["ping"]
    cpu_medians = {key: benchlib.median(values) for key, values in cpu.items()}

    def cpu_cells(key):
        if key not in cpu_medians:
            return ["n/a (no cpuacct)", "-"]
        return [benchlib.fmt_seconds(cpu_medians[key]), benchlib.fmt_ratio(cpu_medians[key] / cpu_medians["ping"])]

    rows = [[label, benchlib.fmt_seconds(medians[key]), benchlib.fmt_ratio(medians[key] / ping)] + cpu_cells(key)
            + [" ".join(benchlib.fmt_seconds(v) for v in samples[key])] for key, label, _run in timed]
    table = benchlib.markdown_table(["command (%d nodes)" % nodes, "median s", "vs ping", "CPU s (controller + nodes)",
                                     "CPU vs ping", "all runs s"], rows)
    targets = []
    for key in [key for key in ("preflight_default", "preflight", "preflight_build") if key in medians]:
        ratio = medians[key] / ping
        targets.append(("%s <= 1.5 x ping" % key, ratio <= 1.5, "%.2fx" % ratio))
        if "setup_hardware" in medians:
            targets.append(("%s < setup(hardware)" % key, medians[key] < medians["setup_hardware"],
                            "%.2fs vs %.2fs" % (medians[key], medians["setup_hardware"])))
    for key, what in (("preflight_default", "the default profiles `[build, gpu]`"), ("preflight", "profiles `[]`")):
        if key not in medians:
            continue
        phases = breakdown_table(breakdown.get(key, []), medians["ping"])
        table += "\n\nWhere `ansible-playbook playbooks/preflight.yml` (%s) spends its time (medians, from task start stamps):\n\n%s" % (
            what, phases)
    notes = ["medians over %d rounds; every round ran every command once, in the order of the table" % repeat,
             "CPU s: the controller's and the nodes' CPU seconds together (a cpuacct group around the bench and its "
             "fleet); on 2 cores the nodes share the controller's CPUs, and CPU seconds move less with load than wall",
             "ansible runs reuse the inventory's ssh ControlMaster (ControlPersist), as consecutive runs do in practice",
             "the controller's bytecode cache on, as on a default Python%s" % (
                 " (PYTHONDONTWRITEBYTECODE was set here and is unset for the timed commands)" if bytecode_was_off else "")]
    data_breakdown = {key: [dict(run) for run in runs] for key, runs in breakdown.items()}
    data = {"nodes": nodes, "repeat": repeat, "samples": samples, "medians": medians, "cpu": cpu, "breakdown": data_breakdown}
    return benchlib.report("fleet_preflight", "Fleet preflight vs ping, setup and the seed's one-liner (%d nodes)" % nodes,
                           info, table, notes, data, targets)


if __name__ == "__main__":
    benchlib.main_wrapper(main)
