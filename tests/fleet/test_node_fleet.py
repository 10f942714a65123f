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
import re

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _node
from fleetlib import REPO_ROOT, flagged, report_hosts, run_playbook

PLAYBOOK = os.path.join(REPO_ROOT, "playbooks", "preflight.yml")

# The node profile with every check that a test does not make its subject switched off or loose.
NODE_PROFILE = {
    "preflight_profiles": ["node"],
    "preflight_required_mounts": [],
    "preflight_scratch_paths": [],
    "preflight_required_services": [],
    "preflight_require_clock_sync": False,
    "preflight_min_available_memory": "1MiB",
    "preflight_max_build_processes": 100,
}


def run_node_profile(fleet, tmp_path, **policy):
    """playbooks/preflight.yml with the node profile and ``policy`` on top: (result, the report's hosts)."""
    result = run_playbook(PLAYBOOK, fleet.inventory_path,
                          extra_vars=dict(NODE_PROFILE, preflight_report_dir=str(tmp_path), **policy))
    assert "Traceback" not in result.stdout + result.stderr
    return result, report_hosts(tmp_path)


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

    result, hosts = run_node_profile(fleet, tmp_path, preflight_required_mounts=[scratch],
                                     preflight_min_free_scratch="16MiB", preflight_required_services=["munged"])
    failed = flagged(hosts)
    assert failed == {"node2": ["services"], "node3": ["filesystems"], "node4": ["filesystems"]}, failed
    reasons = dict((name, entry["reason"]) for name, entry in hosts.items())
    assert reasons["node2"].startswith("services: not running: munged - start it")
    assert "%s is not mounted (it is part of the filesystem on" % scratch in reasons["node3"]
    assert "%s is mounted read-only: remount it read-write" % scratch in reasons["node4"]
    assert "node2" in result.stdout and "not running: munged" in result.stdout
    for name in ("node1", "node5"):
        checks = dict((c["name"], c["status"]) for c in hosts[name]["checks"])
        assert checks["services"] == "ok" and checks["filesystems"] == "ok" and checks["ib_ports"] == "skipped", checks


def test_a_lost_cpu_and_lost_memory_flag_only_their_node(fresh_fleet, tmp_path):
    """cpu_topology and physical_memory on the fleet (issue 30 item 4): node2 has CPU 1 taken offline (its
    ``online`` file reads 0 inside node2 only), node3's /proc/meminfo shows a quarter of the memory (a lost DIMM).
    The policy expects what this machine has; only those two are flagged, each by its own check and reason."""
    cpu = "/sys/devices/system/cpu"
    topology, _problems = _node.collect_topology()
    if not topology or not os.path.exists(os.path.join(cpu, "cpu1", "online")):
        pytest.skip("needs CPU 1 with an online file (2 CPUs or more)")
    with open("/proc/meminfo") as handle:
        meminfo = handle.read()
    total_kib = int(re.search(r"^MemTotal:\s+(\d+) kB", meminfo, re.M).group(1))
    fleet = fresh_fleet(4)
    fake_cpu, fake_meminfo = os.path.join(fleet.dir, "cpu1-online"), os.path.join(fleet.dir, "meminfo")
    with open(fake_cpu, "w") as handle:
        handle.write("0\n")
    with open(fake_meminfo, "w") as handle:
        handle.write(re.sub(r"^MemTotal:\s+\d+ kB", "MemTotal:       %d kB" % (total_kib // 4), meminfo, flags=re.M))
    fleet["node2"].dirty = fleet["node3"].dirty = True
    fleet["node2"].run("mount --bind %s %s/cpu1/online" % (fake_cpu, cpu), check=True)
    fleet["node3"].run("mount --bind %s /proc/meminfo" % fake_meminfo, check=True)

    result, hosts = run_node_profile(fleet, tmp_path, preflight_expected_sockets=topology["sockets"],
                                     preflight_expected_cores=topology["cores"],
                                     preflight_expected_threads=topology["threads"],
                                     preflight_min_memory_total="%dKiB" % (total_kib // 2))
    failed = flagged(hosts)
    assert failed == {"node2": ["cpu_topology"], "node3": ["physical_memory"]}, json.dumps(
        dict((n, hosts[n]["reason"]) for n in hosts), indent=1)
    assert "cpu_topology" in result.stdout and "physical_memory" in result.stdout
    for name in ("node1", "node4"):
        checks = dict((c["name"], c["status"]) for c in hosts[name]["checks"])
        assert checks["cpu_topology"] == "ok" and checks["physical_memory"] == "ok", checks


NODE_FIXTURES = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "node")


def test_an_infiniband_port_down_flags_only_its_node(fresh_fleet, tmp_path):
    """ib_ports on the fleet: every node sees its own /sys/class (a tmpfs inside the node) holding a captured HGX
    node's four HCAs: all NDR and ACTIVE, except node2's, which has mlx5_1 DOWN and mlx5_3 INIT (the degraded capture).
    Only node2 is flagged, naming the ports."""
    fleet = fresh_fleet(3)
    for node in fleet.nodes:
        capture = "hgx_degraded" if node.name == "node2" else "hgx_ndr"
        node.dirty = True
        node.run("mount -t tmpfs gpufleet-sysclass /sys/class && cp -r %s /sys/class/"
                 % os.path.join(NODE_FIXTURES, capture, "sys", "class", "infiniband"), check=True)

    result, hosts = run_node_profile(fleet, tmp_path)
    assert flagged(hosts) == {"node2": ["ib_ports"]}, json.dumps(dict((n, hosts[n]["reason"]) for n in hosts), indent=1)
    assert "mlx5_1 port 1 is DOWN" in hosts["node2"]["reason"], hosts["node2"]["reason"]
    assert "ib_ports" in result.stdout
    for name in ("node1", "node3"):
        checks = dict((c["name"], c["status"]) for c in hosts[name]["checks"])
        assert checks["ib_ports"] == "ok", checks
