# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/_facts/_node.py on the captured trees (fixtures/node: the kernel's own sysfs formats) and this host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _node

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "node")
SERVICES = ["sshd", "munged", "nvidia-persistenced", "slurmd"]


def node(case, clock=(0, 0x2001, 2500)):
    return _node.collect_node(SERVICES, root=os.path.join(FIXTURES, case), clock=lambda: (_node.clock_state(*clock), []))


@pytest.mark.parametrize("text, parsed", [
    ("4: ACTIVE", (4, "ACTIVE")), ("5: LinkUp", (5, "LinkUp")), ("1: DOWN\n", (1, "DOWN")), ("odd", (None, "odd")),
    ("", (None, None)), (None, (None, None))])
def test_parse_numbered(text, parsed):
    assert _node.parse_numbered(text) == parsed


@pytest.mark.parametrize("text, rate", [
    ("400 Gb/sec (4X NDR)", 400.0), ("200 Gb/sec (4X HDR)", 200.0), ("2.5 Gb/sec (1X SDR)", 2.5), ("", None), (None, None)])
def test_parse_rate(text, rate):
    assert _node.parse_rate(text) == rate


@pytest.mark.parametrize("state, status, maxerror, synchronized", [
    (0, 0x2001, 2500, True), (5, 0x40, 16000000, False), (0, 0x40, 16000000, False), (5, 0, 1000, False)])
def test_clock_state(state, status, maxerror, synchronized):
    assert _node.clock_state(state, status, maxerror)["synchronized"] is synchronized


@pytest.mark.parametrize("case, topology, services, ports", [
    ("hgx_ndr", {"sockets": 2, "cores": 4, "threads": 8}, {"sshd": 1, "munged": 1, "nvidia-persistenced": 1, "slurmd": 1},
     [("mlx5_%d" % index, "ACTIVE", "LinkUp", 400.0) for index in range(4)]),
    ("hgx_degraded", {"sockets": 2, "cores": 4, "threads": 7}, {"sshd": 1, "munged": 1, "nvidia-persistenced": 0, "slurmd": 0},
     [("mlx5_0", "ACTIVE", "LinkUp", 400.0), ("mlx5_1", "DOWN", "Disabled", 10.0), ("mlx5_2", "ACTIVE", "LinkUp", 200.0),
      ("mlx5_3", "INIT", "LinkUp", 400.0)]),
    ("pcie_no_ib", {"sockets": 1, "cores": 4, "threads": 4}, {"sshd": 1, "munged": 0, "nvidia-persistenced": 0, "slurmd": 0}, []),
])
def test_the_captured_trees(case, topology, services, ports):
    facts = node(case)
    assert facts["errors"] == []
    assert facts["cpu_topology"] == topology
    assert dict((name, entry["count"]) for name, entry in facts["services"].items()) == services
    assert [(p["device"], p["state_name"], p["phys_state_name"], p["rate_gbps"]) for p in facts["infiniband"]["ports"]] == ports
    assert facts["infiniband"]["present"] is bool(ports)


def test_a_comm_cut_to_15_characters_still_names_its_service():
    facts = node("hgx_ndr")
    assert facts["services"]["nvidia-persistenced"] == {"running": True, "count": 1, "pids": [303]}


def test_an_unreadable_tree_is_said_not_raised(tmp_path):
    facts = _node.collect_node(["sshd"], root=str(tmp_path), clock=lambda: (_node.clock_state(0, 0, 1), []))
    assert facts["services"]["sshd"]["running"] is None and facts["cpu_topology"] is None
    assert any("proc" in error for error in facts["errors"]) and any("system/cpu" in error for error in facts["errors"])
