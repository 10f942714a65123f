# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_ib_counters: InfiniBand error counters read from sysfs trees, their growth between two runs, the state file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _ib_counters as ib
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _node
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _node_facts

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "node")


@pytest.mark.parametrize("text, value", [("0\n", 0), ("1423\n", 1423), ("N/A\n", None), ("", None), ("9" * 25, None),
                                         ("-1", None), ("\u00b2", None)])
def test_parse_counter(text, value):
    assert ib.parse_counter(text) == value


@pytest.mark.parametrize("previous, current, growth, reset", [
    (None, {"link_downed": 1}, None, False),
    ({"link_downed": 1, "symbol_error": 0}, {"link_downed": 7, "symbol_error": 1423}, {"link_downed": 6, "symbol_error": 1423}, False),
    ({"link_downed": 1}, {"link_downed": 0}, None, True),
    ({"link_downed": 1}, {"link_downed": 1, "port_rcv_errors": 5}, {"link_downed": 0}, False),  # new counter: no growth
    ({"link_downed": "x"}, {"link_downed": 3}, {}, False),
    ({"link_downed": 1}, {"link_downed": None}, {}, False),
])
def test_counter_growth(previous, current, growth, reset):
    assert ib.counter_growth(previous, current) == (growth, reset)


def run(tree, state, now):
    return _node.collect_node(root=os.path.join(FIXTURES, tree), clock=lambda: ({"synchronized": True}, []),
                              ib_counters=True, ib_state_path=state, now=now)


def test_two_runs_on_the_fixture_trees(tmp_path):
    state = str(tmp_path / "cache" / "ib-counters.json")
    first = run("hgx_ndr", state, 1000.0)["infiniband"]
    assert first["counters_since_seconds"] is None
    assert all(port["counter_growth"] is None and port["counters"]["link_downed"] == 1 for port in first["ports"])
    assert "port_xmit_data" not in first["ports"][0]["counters"]  # traffic is no error
    assert json.load(open(state))["ports"]["mlx5_0/1"]["link_downed"] == 1
    second = run("hgx_degraded", state, 1600.0)["infiniband"]
    assert second["counters_since_seconds"] == 600.0
    by_port = dict(("%s/%s" % (p["device"], p["port"]), p) for p in second["ports"])
    growth = by_port["mlx5_0/1"]["counter_growth"]
    assert (growth["link_downed"], growth["symbol_error"], growth["port_rcv_errors"], growth["link_error_recovery"]) == (6, 1423, 12, 3)
    assert set(by_port["mlx5_1/1"]["counter_growth"].values()) == {0}
    assert by_port["mlx5_3/1"]["counter_growth"] is None and by_port["mlx5_3/1"]["counters_reset"] is True


def test_without_counters_or_state(tmp_path):
    facts = _node.collect_node(root=os.path.join(FIXTURES, "hgx_ndr"), clock=lambda: ({"synchronized": True}, []))
    assert "counters" not in facts["infiniband"]["ports"][0]  # off by default: the node subset costs what it did
    nothing = run("hgx_ndr", None, 1.0)["infiniband"]
    assert nothing["counters_state"] is None and nothing["ports"][0]["counter_growth"] is None
    none_ib = run("pcie_no_ib", str(tmp_path / "s.json"), 1.0)
    assert none_ib["infiniband"]["present"] is False and not os.path.exists(str(tmp_path / "s.json"))


@pytest.mark.parametrize("content", [b"not json", b'{"version": 99}', b"[1]", b"x" * (ib.MAX_STATE_BYTES + 2)])
def test_a_bad_state_file_is_no_state(tmp_path, content):
    path = tmp_path / "ib-counters.json"
    path.write_bytes(content)
    assert ib.load_state(str(path)) is None


def test_a_state_path_that_is_no_file(tmp_path):
    os.symlink(str(tmp_path / "elsewhere"), str(tmp_path / "link.json"))
    assert ib.load_state(str(tmp_path / "link.json")) is None
    os.mkfifo(str(tmp_path / "fifo.json"))
    assert ib.load_state(str(tmp_path / "fifo.json")) is None  # never blocks on a FIFO
    blocked = tmp_path / "file"
    blocked.write_text(u"x")
    assert "ib-counters.json" in ib.save_state(str(blocked / "ib-counters.json"), {"version": 1})


def test_state_path_beside_the_probe_cache():
    class Cached(object):
        path = "/var/lib/gpufleet-preflight/probes.json"
    # named after the node: nodes sharing a home over NFS keep their own counters
    assert _node_facts.ib_state_path(Cached(), {}) == "/var/lib/gpufleet-preflight/ib-counters-%s.json" % os.uname()[1]
    assert _node_facts.ib_state_path(Cached(), {"check_mode": True}) is None
    assert _node_facts.ib_state_path(lambda argv, timeout: None, {}) is None
