# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node profile on the fleet (issue 30 item 4): each node its own /proc and mounts, faults made for real.

Every node runs a 'munged' (a copy of sleep, found by its executable name) and has a scratch tmpfs; node2's munged
is missing, node3's scratch is not mounted, node4's scratch is mounted read-only. Only those three are flagged, each
with its own reason; the clock check is off (this machine has no NTP daemon: its own test is tests/host).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from fleetlib import REPO_ROOT, run_playbook

PLAYBOOK = os.path.join(REPO_ROOT, "playbooks", "preflight.yml")


def test_the_node_profile_flags_exactly_the_broken_nodes(fresh_fleet, tmp_path):
    fleet = fresh_fleet(5)
    scratch = os.path.join(fleet.dir, "scratch")
    os.makedirs(scratch)
    for node in fleet.nodes:
        if node.name != "node2":
            node.spawn_orphan("munged")
        if node.name != "node3":
            node.mount_tmpfs(scratch, "64m")
    fleet["node4"].run("mount -o remount,ro %s" % scratch, check=True)

    result = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars={
        "preflight_profiles": ["node"],
        "preflight_required_mounts": [scratch],
        "preflight_scratch_paths": [],
        "preflight_min_free_scratch": "16MiB",
        "preflight_required_services": ["munged"],
        "preflight_require_clock_sync": False,
        "preflight_min_available_memory": "1MiB",
        "preflight_max_build_processes": 100,
        "preflight_report_dir": str(tmp_path),
    })
    assert "Traceback" not in result.stdout + result.stderr
    with open(os.path.join(str(tmp_path), "preflight.json")) as handle:
        hosts = json.load(handle)["hosts"]
    failed = dict((name, entry["failed_checks"]) for name, entry in hosts.items() if entry["status"] != "ready")
    assert failed == {"node2": ["services"], "node3": ["filesystems"], "node4": ["filesystems"]}, failed
    reasons = dict((name, entry["reason"]) for name, entry in hosts.items())
    assert reasons["node2"].startswith("services: not running: munged - start it")
    assert "%s is not mounted (it is part of the filesystem on" % scratch in reasons["node3"]
    assert "%s is mounted read-only: remount it read-write" % scratch in reasons["node4"]
    assert "node2" in result.stdout and "not running: munged" in result.stdout
    for name in ("node1", "node5"):
        checks = dict((c["name"], c["status"]) for c in hosts[name]["checks"])
        assert checks["services"] == "ok" and checks["filesystems"] == "ok" and checks["ib_ports"] == "skipped", checks
