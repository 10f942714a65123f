# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugin_utils/_gate.py: the fleet gate's decision from a report's counts, table-driven."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _gate


def report(ready=1, not_ready=1, unreachable=2):
    return {"summary": dict(ready=ready, not_ready=not_ready, unreachable=unreachable,
                            total=ready + not_ready + unreachable)}


@pytest.mark.parametrize("limit, abort", [(None, False), ("", False), (3, False), ("3", False), (2, True), ("75%", False),
                                          ("50%", True), ("25%", True), ("0", True), (" 3 ", False)])
def test_too_many_not_ready(limit, abort):
    assert _gate.too_many_not_ready(report(), limit)[0] is abort


@pytest.mark.parametrize("limit", ["two", "-1", "150%", "1.5", "%", "03"])
def test_bad_limits_are_refused_naming_the_option(limit):
    with pytest.raises(ValueError, match="^preflight_max_not_ready: "):
        _gate.too_many_not_ready(report(), limit)


@pytest.mark.parametrize("limit, decision, allowed, reason", [
    (None, "continue", None, "no preflight_max_not_ready: no limit; 3 of 4 hosts are not ready or unreachable"),
    ("3", "continue", 3, "3 of 4 hosts are not ready or unreachable, within preflight_max_not_ready=3"),
    ("50%", "stop", 2, "3 of 4 hosts are not ready or unreachable, more than preflight_max_not_ready=50% (2 of 4 hosts) allows"),
])
def test_the_decision_every_report_shows(limit, decision, allowed, reason):
    gate = _gate.gate(report(), limit)
    assert (gate["decision"], gate["abort"], gate["allowed"], gate["reason"]) == (decision, decision == "stop", allowed, reason)
    assert gate["not_ready"] == 3 and gate["total"] == 4


def test_the_gate_line():
    assert _gate.gate_line({}) is None
    assert _gate.gate_line({"gate": _gate.gate(report(), "0")}).startswith("Gate: STOPPED THE RUN - 3 of 4 hosts")
    assert _gate.gate_line({"gate": _gate.gate(report(), None)}).startswith("Gate: continue - no preflight_max_not_ready")


def test_a_limit_with_control_characters_is_refused():
    with pytest.raises(ValueError, match="^preflight_max_not_ready: "):
        _gate.gate(report(), "9\x1b[2J")


def test_run_stats_say_each_hosts_verdict_and_the_gate_as_set_stats_did():
    results = {"n1": {"ready": True, "failed_checks": [], "message": "ready"},
               "n2": {"ready": False, "failed_checks": ["gpu_count"], "message": "not ready: gpu_count: 7 GPUs"},
               "n3": {"unreachable": True, "msg": "ssh: connect refused"},
               "n4": None}
    stats = _gate.run_stats(results, {"abort": False, "reason": "2 of 4 not ready", "decision": "continue"})
    assert stats["ready"] == ["n1"] and stats["not_ready"] == ["n2", "n3", "n4"]
    assert stats["gate"]["decision"] == "continue" and stats["gate"]["reason"] == "2 of 4 not ready"
    assert stats["nodes"]["n3"] == dict(ready=False, unreachable=True, failed_checks=[], message="ssh: connect refused")
    assert stats["nodes"]["n4"]["message"] == "not checked" and stats["nodes"]["n2"]["failed_checks"] == ["gpu_count"]
    assert _gate.run_stats({}, {"abort": True})["gate"]["decision"] == "stop"
