# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/_readiness/_node_checks.py: the node profile's checks, table-driven, on the captured node trees."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _node
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _node_checks as nc
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy_validation
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options as table

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "node")
GIB = 1024 ** 3
CLOCKS = {"synced": (0, 0x2001, 2500), "unsynced": (5, 0x40, 16000000)}


def node(case, clock="synced"):
    return _node.collect_node(["sshd", "munged", "nvidia-persistenced", "slurmd"], root=os.path.join(FIXTURES, case),
                              clock=lambda: (_node.clock_state(*CLOCKS[clock]), []))


def policy(**overrides):
    return _policy_validation.validate_policy(dict(table.defaults(), profiles=["node"], **overrides))


def disk(free=10 * GIB, mount_point="/", read_only=False, writable=True, exists=True):
    return {"exists": exists, "free_bytes": free, "mount_point": mount_point, "read_only": read_only, "writable": writable}


HEALTHY = {"node": node("hgx_ndr"), "memory": {"host": {"total_bytes": 2048 * GIB}},
           "disks": {"paths": {"/tmp": disk(), "/scratch": disk(mount_point="/scratch")}}}
STRICT = dict(required_mounts=["/scratch"], required_services=["sshd", "munged", "nvidia-persistenced", "slurmd"],
              expected_sockets=2, expected_cores=4, expected_threads=8, min_memory_total="2000GiB",
              expected_ib_ports=4, min_ib_rate=400)
CHECKS = (nc.check_filesystems, nc.check_services, nc.check_cpu_topology, nc.check_physical_memory, nc.check_clock_sync,
          nc.check_ib_ports)


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
def test_a_healthy_node_passes_every_check_under_a_strict_policy(check):
    entry = check(HEALTHY, policy(**STRICT))
    assert entry["status"] == "ok" and entry["profile"] == "node", entry


@pytest.mark.parametrize("check", (nc.check_filesystems, nc.check_services, nc.check_cpu_topology, nc.check_physical_memory),
                         ids=lambda check: check.__name__)
def test_what_the_policy_does_not_ask_for_is_not_checked(check):
    assert check(HEALTHY, policy(scratch_paths=[])) is None


def with_facts(**parts):
    facts = dict(HEALTHY)
    facts.update(parts)
    return facts


CASES = [
    # (check, facts, policy overrides, status, words in the message)
    (nc.check_filesystems, with_facts(disks={"paths": {"/tmp": disk(), "/scratch": disk(mount_point="/")}}),
     {"required_mounts": ["/scratch"]}, "failed", "/scratch is not mounted (it is part of the filesystem on /)"),
    (nc.check_filesystems, with_facts(disks={"paths": {"/tmp": disk(), "/scratch": disk(mount_point="/scratch", read_only=True)}}),
     {"required_mounts": ["/scratch"]}, "failed", "/scratch is mounted read-only: remount it read-write"),
    (nc.check_filesystems, with_facts(disks={"paths": {"/tmp": disk(free=GIB // 2)}}), {}, "failed",
     "/tmp has 512Mi free, 1.0Gi needed"),
    (nc.check_filesystems, with_facts(disks={"paths": {"/tmp": {"free_bytes": None, "error": "statvfs: EIO"}}}), {},
     "unknown", "/tmp: statvfs: EIO"),
    (nc.check_filesystems, {"node": HEALTHY["node"]}, {}, "unknown", "disks facts were not gathered"),
    (nc.check_services, with_facts(node=node("hgx_degraded")), {"required_services": ["sshd", "nvidia-persistenced", "slurmd"]},
     "failed", "not running: nvidia-persistenced, slurmd - start them"),
    (nc.check_services, {}, {"required_services": ["sshd"]}, "unknown", "node facts were not gathered"),
    (nc.check_cpu_topology, with_facts(node=node("hgx_degraded")), {"expected_threads": 8, "expected_cores": 4}, "failed",
     "7 threads online, 8 expected: a CPU offline"),
    (nc.check_cpu_topology, with_facts(node=node("pcie_no_ib")), {"expected_sockets": 2}, "failed", "1 sockets online, 2 expected"),
    (nc.check_physical_memory, with_facts(memory={"host": {"total_bytes": 1536 * GIB}}), {"min_memory_total": "2000GiB"},
     "failed", "the node has 1.5Ti of memory, 2.0Ti expected: a DIMM failed"),
    (nc.check_physical_memory, {}, {"min_memory_total": "1GiB"}, "unknown", "MemTotal could not be read"),
    (nc.check_clock_sync, with_facts(node=node("hgx_ndr", clock="unsynced")), {}, "failed",
     "the kernel's clock is not synchronized (adjtimex: max error 16.0 s): start chronyd"),
    (nc.check_ib_ports, with_facts(node=node("hgx_degraded")), {}, "failed",
     "mlx5_1 port 1 is DOWN / Disabled: check the cable"),
    (nc.check_ib_ports, with_facts(node=node("hgx_degraded")), {"min_ib_rate": 400}, "failed",
     "mlx5_2 port 1 runs at 200 Gb/sec (4X HDR), 400 Gb/s expected"),
    (nc.check_ib_ports, with_facts(node=node("hgx_degraded")), {}, "failed", "mlx5_3 port 1 is INIT / LinkUp"),
    (nc.check_ib_ports, with_facts(node=node("pcie_no_ib")), {}, "skipped", "no InfiniBand/RoCE devices on this node"),
    (nc.check_ib_ports, with_facts(node=node("pcie_no_ib")), {"expected_ib_ports": 8}, "failed",
     "0 InfiniBand/RoCE ports found, 8 expected"),
]


@pytest.mark.parametrize("check, facts, overrides, status, words", CASES,
                         ids=["%s-%d" % (case[0].__name__, i) for i, case in enumerate(CASES)])
def test_faults_name_the_cause(check, facts, overrides, status, words):
    entry = check(facts, policy(**overrides))
    assert entry["status"] == status, entry
    assert words in entry["message"], entry["message"]


def test_no_false_alarm_on_the_healthy_trees():
    """The default node policy on the healthy captured trees: nothing fails."""
    for case in ("hgx_ndr", "pcie_no_ib"):
        facts = with_facts(node=node(case))
        for check in CHECKS:
            entry = check(facts, policy())
            assert entry is None or entry["status"] in ("ok", "skipped"), (case, entry)


@pytest.mark.parametrize("overrides, words", [
    ({"required_mounts": ["scratch"]}, "required_mounts: 'scratch' is not an absolute path"),
    ({"scratch_paths": [""]}, "scratch_paths: '' is not an absolute path"),
    ({"required_services": ["/usr/sbin/sshd"]}, "required_services: '/usr/sbin/sshd' is not an executable name"),
    ({"expected_sockets": 65}, "expected_sockets: must be 0 to 64"),
    ({"min_memory_total": "2TB"}, "min_memory_total"),
    ({"min_ib_rate": -1}, "min_ib_rate"),
])
def test_bad_node_options_are_refused_by_name(overrides, words):
    with pytest.raises(ValueError) as err:
        policy(**overrides)
    assert words in str(err.value)


def two_runs(tmp_path, first="hgx_ndr", second="hgx_degraded"):
    """The node facts of a second run with IB counters, the first run's counts kept in a state file (issue 37)."""
    state = str(tmp_path / "ib-counters.json")

    def clock():
        return _node.clock_state(*CLOCKS["synced"]), []
    _node.collect_node(root=os.path.join(FIXTURES, first), clock=clock, ib_counters=True, ib_state_path=state, now=1000.0)
    return {"node": _node.collect_node(root=os.path.join(FIXTURES, second), clock=clock, ib_counters=True,
                                       ib_state_path=state, now=1600.0)}


def test_ib_counters_name_the_flapping_port_and_the_growing_counters(tmp_path):
    entry = nc.check_ib_counters(two_runs(tmp_path), policy(check_ib_counters=True))
    assert entry["status"] == "failed", entry
    assert "mlx5_0 port 1 flapped: link_downed grew by 6" in entry["message"]
    assert "mlx5_0 port 1 error counters grew: link_error_recovery +3, port_rcv_errors +12, symbol_error +1423" in entry["message"]
    assert entry["message"].endswith("(over the last 600s)") and "mlx5_1" not in entry["message"]
    assert "mlx5_3/1" not in entry["observed"]  # its counter went down: a new baseline, not judged


@pytest.mark.parametrize("overrides, status, words", [
    (dict(check_ib_counters=True, max_ib_link_downed=6, max_ib_error_growth=1423), "ok", ""),
    (dict(check_ib_counters=True, max_ib_link_downed=6), "failed", "symbol_error +1423"),
    (dict(check_ib_counters=True, max_ib_error_growth=2000), "failed", "flapped"),
])
def test_ib_counter_thresholds(tmp_path, overrides, status, words):
    entry = nc.check_ib_counters(two_runs(tmp_path), policy(**overrides))
    assert entry["status"] == status and words in entry["message"], entry


def test_ib_counters_first_run_steady_node_and_no_hca(tmp_path):
    assert nc.check_ib_counters(HEALTHY, policy()) is None  # off by default
    first = nc.check_ib_counters({"node": node("hgx_ndr")}, policy(check_ib_counters=True))
    assert first["status"] == "skipped" and "no port exposes error counters" in first["message"]
    steady = nc.check_ib_counters(two_runs(tmp_path, "hgx_ndr", "hgx_ndr"), policy(check_ib_counters=True))
    assert steady["status"] == "ok", steady
    state = str(tmp_path / "fresh.json")
    baseline = {"node": _node.collect_node(root=os.path.join(FIXTURES, "hgx_ndr"), clock=lambda: ({"synchronized": True}, []),
                                           ib_counters=True, ib_state_path=state, now=1.0)}
    entry = nc.check_ib_counters(baseline, policy(check_ib_counters=True))
    assert entry["status"] == "skipped" and "first run" in entry["message"] and state in entry["message"]
    none_ib = nc.check_ib_counters({"node": node("pcie_no_ib")}, policy(check_ib_counters=True))
    assert none_ib["status"] == "skipped" and "no InfiniBand" in none_ib["message"]
    assert nc.check_ib_counters({}, policy(check_ib_counters=True))["status"] == "unknown"
