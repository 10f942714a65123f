# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drain circuit breaker (issue 38 item 1): the cap from a table, counted from sinfo's listing; apply() holding
it before a drain and undoing its own drain when nodes drained at the same moment put it over the cap."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _drain_cap, _slurm

NOW = _slurm.slurm_epoch("2026-12-04T22:00:00")
RECENT = "2026-12-04T21:30:00"
OLD = "2026-12-04T19:00:00"
# what _slurm.apply compares with its own clock (time.time()): a drain ten minutes ago, whenever the suite runs
LIVE_RECENT = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 600))
SLURM = (_slurm.is_drained, _slurm.slurm_epoch)


def listing(*rows):
    return "\n".join("|".join(row) for row in rows) + "\n"


# total, max_nodes, percent, expected cap
CAPS = [
    (8, 20, 25, 2),          # the defaults on 8 nodes
    (1000, 20, 25, 20),      # and on 1,000
    (3, 20, 25, 1),          # at least one node
    (8, None, 25, 2),
    (8, 5, None, 5),
    (8, None, None, None),   # no breaker
    (8, 0, 25, 0),           # never drain
    (100, 50, 10.5, 10),
]


@pytest.mark.parametrize("total, max_nodes, percent, expected", CAPS)
def test_cap(total, max_nodes, percent, expected):
    assert _drain_cap.cap(total, max_nodes, percent) == expected


def test_parse_listing_merges_partitions_and_placeholders():
    text = listing(("n1", "build*", "idle", "Unknown", "none"), ("n1", "gpu", "idle", "Unknown", "none"),
                   ("n2", "gpu", "drained", RECENT, "gpufleet: x | y"), ("garbage",), ("", "p", "idle", "", ""))
    nodes = _drain_cap.parse_listing(text)
    assert sorted(nodes) == ["n1", "n2"]
    assert nodes["n1"] == dict(partitions={"build", "gpu"}, state="idle", time="", reason="")
    assert nodes["n2"]["reason"] == "gpufleet: x | y"


# rows, node, expected members
MEMBERS = [
    ([("a", "p1", "idle", "", ""), ("b", "p1", "idle", "", ""), ("c", "p2", "idle", "", "")], "a", ["a", "b"]),
    ([("a", "p1", "idle", "", ""), ("a", "p2", "idle", "", ""), ("c", "p2", "idle", "", "")], "a", ["a", "c"]),
    ([("a", "p1", "idle", "", ""), ("c", "p2", "idle", "", "")], "zzz", ["a", "c"]),   # unlisted: every node
]


@pytest.mark.parametrize("rows, node, expected", MEMBERS)
def test_members(rows, node, expected):
    assert _drain_cap.members(_drain_cap.parse_listing(listing(*rows)), node) == expected


# state, time, reason, window, counted
OURS = [
    ("drained", RECENT, "gpufleet: build_processes: 1", 3600, True),
    ("draining", RECENT, "gpufleet: x", 3600, True),
    ("idle+drain", RECENT, "gpufleet: x", 3600, True),
    ("drained*", RECENT, "gpufleet: x", 3600, True),            # not responding, still our drain held
    ("drained", OLD, "gpufleet: x", 3600, False),                # before the window
    ("drained", OLD, "gpufleet: x", 0, True),                    # window 0: any age
    ("drained", "", "gpufleet: x", 3600, True),                  # no readable time: counted (safe side)
    ("drained", RECENT, "admin: bad fan", 3600, False),          # a person's drain
    ("drained", RECENT, "gpufleet:x", 3600, False),              # not our prefix and a space
    ("idle", RECENT, "gpufleet: x", 3600, False),                # a reason on an undrained node
    ("down", RECENT, "gpufleet: x", 3600, False),
]


@pytest.mark.parametrize("state, when, reason, window, counted", OURS)
def test_ours(state, when, reason, window, counted):
    nodes = _drain_cap.parse_listing(listing(("n1", "p", state, when, reason)))
    assert _drain_cap.ours(nodes, ["n1"], "gpufleet:", NOW, window, SLURM) == (["n1"] if counted else [])


def fleet(drained, size=8, partition="build"):
    """sinfo's listing of ``size`` nodes, ``drained`` of them (names) drained by us recently."""
    rows = []
    for index in range(1, size + 1):
        name = "node%d" % index
        if name in drained:
            rows.append((name, partition, "drained", RECENT, "gpufleet: check: bad"))
        else:
            rows.append((name, partition, "idle", "Unknown", "none"))
    return _drain_cap.parse_listing(listing(*rows))


LIMITS = dict(max_nodes=20, percent=25, window=3600)
# drained now, node, after, allowed
JUDGE = [
    ([], "node3", False, True),
    (["node1"], "node3", False, True),
    (["node1", "node2"], "node3", False, False),            # 2 of 8 held: no third
    (["node1", "node3"], "node3", False, True),             # an update of our own drain is no new one
    (["node1", "node3"], "node3", True, True),               # after: ours included, 2 <= 2
    (["node1", "node2", "node3"], "node3", True, False),     # after: three at once, over the cap
]


@pytest.mark.parametrize("drained, node, after, allowed", JUDGE)
def test_judge(drained, node, after, allowed):
    judged = _drain_cap.judge(fleet(drained), node, "gpufleet:", LIMITS, SLURM, now=NOW, after=after)
    assert judged["allowed"] is allowed and judged["cap"] == 2 and judged["total"] == 8
    if not allowed:
        assert "circuit breaker" in judged["message"] and "node1" in judged["message"]
        assert ("resumed" in judged["message"]) is after


def test_judge_without_limits_always_allows():
    judged = _drain_cap.judge(fleet(["node%d" % i for i in range(1, 9)]), "node1", "gpufleet:",
                              dict(max_nodes=None, percent=None, window=0), SLURM, now=NOW)
    assert judged["allowed"] and judged["cap"] is None


# ---------------------------------------------------------------- apply() with the breaker, a fleet of nodes


class FakeFleet(object):
    """sinfo/scontrol for several nodes as slurmctld answers them; ``late`` nodes get drained (by another node's
    check) between this node's drain and its read back, as when every node's check runs at once."""

    def __init__(self, drained=(), late=()):
        self.nodes = dict(("node%d" % i, dict(state="idle", reason="none", time="Unknown")) for i in range(1, 9))
        for name in drained:
            self.nodes[name].update(state="drained", reason="gpufleet: check: bad", time=LIVE_RECENT)
        self.late = list(late)
        self.calls = []

    def run(self, argv):
        self.calls.append(argv)
        if argv[0].endswith("sinfo") and "-n" in argv:
            node = self.nodes[argv[argv.index("-n") + 1]]
            return 0, "%s|%s|root|%s\n" % (node["state"], node["time"], node["reason"]), ""
        if argv[0].endswith("sinfo"):
            return 0, "".join("%s|build*|%s|%s|%s\n" % (name, n["state"], n["time"], n["reason"])
                              for name, n in sorted(self.nodes.items())), ""
        name = argv[2][len("NodeName="):]
        if "State=DRAIN" in argv:
            self.nodes[name].update(state="drained", reason=argv[-1][len("Reason="):], time=LIVE_RECENT)
            for other in self.late:
                self.nodes[other].update(state="drained", reason="gpufleet: check: bad", time=LIVE_RECENT)
        else:
            self.nodes[name].update(state="idle", reason="none", time="Unknown")
        return 0, "", ""


FAILED = [dict(name="check", message="bad")]


def apply(slurm, tmp_path, node="node3", **kwargs):
    return _slurm.apply(node, False, FAILED, slurm.run, lambda n: "/usr/bin/" + n, state_dir=str(tmp_path),
                        limits=LIMITS, **kwargs)


def test_apply_holds_a_drain_beyond_the_cap(tmp_path):
    slurm = FakeFleet(drained=["node1", "node2"])
    out = apply(slurm, tmp_path)
    assert out["held_back"] and out["action"] == "none" and not out["changed"] and out["notice"]
    assert slurm.nodes["node3"]["state"] == "idle" and not any(a[0].endswith("scontrol") for a in slurm.calls)
    assert "2 of at most 2 of the 8 nodes" in out["message"]


def test_apply_in_check_mode_says_the_breaker_holds(tmp_path):
    slurm = FakeFleet(drained=["node1", "node2"])
    out = apply(slurm, tmp_path, check_mode=True)
    assert out["held_back"] and not out["changed"]


def test_apply_drains_within_the_cap(tmp_path):
    slurm = FakeFleet(drained=["node1"])
    out = apply(slurm, tmp_path)
    assert out["action"] == "drain" and out["changed"] and not out["held_back"]
    assert slurm.nodes["node3"]["state"] == "drained"


def test_apply_undoes_its_own_drain_when_others_landed_at_once(tmp_path):
    slurm = FakeFleet(drained=["node1"], late=["node2"])
    out = apply(slurm, tmp_path)
    assert out["held_back"] and out["action"] == "none" and not out["changed"] and out["error"] is None
    assert slurm.nodes["node3"]["state"] == "idle" and "resumed" in out["message"]
    assert not os.path.exists(str(tmp_path / "slurm-node3.json"))   # nothing of ours left to resume later


def test_an_update_of_our_own_drain_is_never_held(tmp_path):
    slurm = FakeFleet(drained=["node1", "node2"])
    first = apply(slurm, tmp_path, node="node2")   # adopt nothing: node2's drain is no record of ours -> left alone
    assert first["action"] == "none" and not first["held_back"]
