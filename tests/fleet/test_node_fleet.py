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
import subprocess

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


HARDWARE = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "hardware")
IPMITOOL = """#!/bin/sh
# A stand-in ipmitool: `sel elist` and `sensor` answered from ipmitool.d/ beside it (captured formats, fixtures/hardware).
dir=$(dirname "$0")/ipmitool.d
case "$1" in
    sel) cat "$dir/sel.txt" ;;
    sensor) cat "$dir/sensor.txt" ;;
    *) echo "ipmitool stand-in: $* not supported" >&2; exit 1 ;;
esac
"""
NVME = """#!/bin/sh
# A stand-in nvme-cli: `nvme smart-log /dev/nvmeN -o json` answered from nvme.d/smart.json beside it.
cat "$(dirname "$0")/nvme.d/smart.json"
"""
# A real process in uninterruptible sleep: vfork's parent waits in D state until its child exits (10 minutes).
D_STATE_C = "#include <unistd.h>\nint main(void) { if (vfork() == 0) { sleep(600); _exit(0); } return 0; }\n"
IB_COUNTERS = ("symbol_error", "link_downed", "port_rcv_errors", "link_error_recovery")


def fixture_text(name):
    with open(os.path.join(HARDWARE, name)) as handle:
        return handle.read()


def fake_sys_class(node, base):
    """The node's own /sys/class (a tmpfs inside it only): one NVMe controller and one InfiniBand port with counters,
    the counters kept in ``base`` on the host so the test can grow them between runs."""
    ports = "/sys/class/infiniband/mlx5_0/ports/1"
    node.run("mount -t tmpfs -o size=1m gpufleet-sys /sys/class && mkdir -p /sys/class/nvme/nvme0 %s/counters && "
             "echo 'SAMSUNG MZQL23T8HCLS' > /sys/class/nvme/nvme0/model && echo '4: ACTIVE' > %s/state && "
             "echo '5: LinkUp' > %s/phys_state && echo '400 Gb/sec (4X NDR)' > %s/rate && echo InfiniBand > %s/link_layer"
             % (ports, ports, ports, ports, ports), check=True)
    node.dirty = True
    os.makedirs(base)
    for name in IB_COUNTERS:
        with open(os.path.join(base, name), "w") as handle:
            handle.write("0\n")
        node.run("touch %s/counters/%s && mount --bind %s %s/counters/%s" % (ports, name, os.path.join(base, name), ports, name),
                 check=True)


def test_node_hardware_faults_flag_exactly_their_node(fresh_fleet, tmp_path):
    """Issue 37 items 3 and 4 on the fleet, each fault real or read through the node's own stand-in tool: node2 has a
    process stuck in D state (a real vfork parent) and no ipmitool or nvme-cli (said, not failed); node3's BMC logs a
    new SEL entry between two runs and reads a sensor at critical; node4's NVMe reports a critical warning; node5's
    InfiniBand port flaps (link_downed and symbol_error grow between the runs). node1 has every tool, all healthy.
    The nodes share this machine's home: each one's SEL and IB baselines must stay its own."""
    fleet = fresh_fleet(5)
    # the nodes share this machine's home: no SEL or IB baseline of an earlier fleet's nodes of the same names
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpufleet-preflight")
    for node in fleet.nodes:
        for name in ("ipmi-sel-%s.json", "ib-counters-%s.json"):
            if os.path.exists(os.path.join(cache, name % node.name)):
                os.unlink(os.path.join(cache, name % node.name))
    binary = os.path.join(fleet.dir, "d-state")
    source = binary + ".c"
    with open(source, "w") as handle:
        handle.write(D_STATE_C)
    subprocess.run(["gcc", "-O1", "-o", binary, source], check=True)
    healthy_sensors = "".join(line + "\n" for line in fixture_text("ipmitool-sensor.txt").splitlines() if "| ok" in line)
    for node in fleet.nodes:
        if node.name == "node2":
            continue
        node.put_stub("/usr/local/sbin/ipmitool", IPMITOOL)
        node.put_stub("/usr/local/sbin/ipmitool.d/sel.txt", fixture_text("ipmitool-sel-elist-before.txt"), 0o644)
        node.put_stub("/usr/local/sbin/ipmitool.d/sensor.txt", fixture_text("ipmitool-sensor.txt") if node.name == "node3"
                      else healthy_sensors, 0o644)
        node.put_stub("/usr/local/sbin/nvme", NVME)
        node.put_stub("/usr/local/sbin/nvme.d/smart.json", fixture_text(
            "nvme-smart-log-failing.json" if node.name == "node4" else "nvme-smart-log-healthy.json"), 0o644)
        fake_sys_class(node, os.path.join(fleet.dir, "ib-%s" % node.name))
    fleet["node2"].run("setsid %s </dev/null >/dev/null 2>&1 &" % binary, check=True)
    policy = dict(preflight_check_d_state=True, preflight_check_ipmi_sel=True, preflight_check_sensors=True,
                  preflight_check_nvme=True, preflight_check_ib_counters=True)
    try:
        _first, hosts = run_node_profile(fleet, tmp_path, **policy)  # the SEL and IB baselines are recorded
        assert flagged(hosts) == {"node2": ["d_state"], "node3": ["sensors"], "node4": ["nvme_health"]}, flagged(hosts)
        fleet["node3"].put_stub("/usr/local/sbin/ipmitool.d/sel.txt", fixture_text("ipmitool-sel-elist-after.txt"), 0o644)
        for name, value in (("link_downed", 2), ("symbol_error", 25)):
            with open(os.path.join(fleet.dir, "ib-node5", name), "w") as handle:
                handle.write("%d\n" % value)
        result, hosts = run_node_profile(fleet, tmp_path, **policy)
    finally:
        fleet["node2"].run("pkill -9 -f %s" % binary)
    failed = flagged(hosts)
    assert failed == {"node2": ["d_state"], "node3": ["ipmi_sel", "sensors"], "node4": ["nvme_health"],
                      "node5": ["ib_counters"]}, json.dumps(dict((n, hosts[n]["reason"]) for n in failed), indent=1)
    checks = dict((name, dict((c["name"], c) for c in entry["checks"])) for name, entry in hosts.items())
    assert "processes stuck in uninterruptible sleep (D state): d-state" in checks["node2"]["d_state"]["message"]
    for check in ("ipmi_sel", "sensors"):
        assert checks["node2"][check]["status"] == "skipped", checks["node2"][check]
        assert "ipmitool is not installed" in checks["node2"][check]["message"]
    assert "nvme-cli is not installed" in checks["node2"]["nvme_health"]["message"] or "no NVMe controller" in checks[
        "node2"]["nvme_health"]["message"], checks["node2"]["nvme_health"]
    assert "2 new BMC event log entries" in checks["node3"]["ipmi_sel"]["message"], checks["node3"]["ipmi_sel"]
    assert "Bus Uncorrectable error" in checks["node3"]["ipmi_sel"]["message"]
    assert "CPU2 Temp at 101.000 degrees C (critical)" in checks["node3"]["sensors"]["message"]
    assert "critical warning" in checks["node4"]["nvme_health"]["message"], checks["node4"]["nvme_health"]
    assert "link_downed" in checks["node5"]["ib_counters"]["message"], checks["node5"]["ib_counters"]
    for check in ("d_state", "ipmi_sel", "sensors", "nvme_health", "ib_counters"):
        assert checks["node1"][check]["status"] == "ok", (check, checks["node1"][check])
    assert "d_state" in result.stdout and "ib_counters" in result.stdout
