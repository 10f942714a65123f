# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waiting for readiness, the fleet reports, and gating a provisioning playbook -- on the real fleet."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
from xml.etree import ElementTree

from fleetlib import REPO_ROOT, TIMINGS, run_playbook

GIB = 1024 ** 3
PREFLIGHT = os.path.join(REPO_ROOT, "playbooks", "preflight.yml")
GATED = os.path.join(REPO_ROOT, "playbooks", "examples", "gated_provisioning.yml")
POLICY = {"preflight_profiles": [], "preflight_min_available_memory": "4GiB"}


def three_bad_nodes(fleet):
    """node2: an orphaned ninja; node3: a 2 GiB cgroup (4 GiB asked); node4: sshd stopped."""
    fleet["node2"].spawn_orphan("ninja")
    fleet["node3"].set_memory_limit(2 * GIB)
    fleet["node4"].stop_sshd()
    return {"node2", "node3", "node4"}


def test_wait_sees_a_build_process_exit(fleet, tmp_path):
    node = fleet["node1"]
    node.spawn_orphan("ninja", seconds=10)
    short = run_playbook(PREFLIGHT, fleet.inventory_path, args=["--limit", "node1"], extra_vars=dict(
        POLICY, preflight_wait=3, preflight_interval=1, preflight_report_dir=str(tmp_path / "short")))
    assert short.rc == 2, short.stdout[-2000:]
    assert re.search(r"still not ready after waiting 3 s: \d+ checks of the node", short.stdout), short.stdout[-2000:]

    # A fresh 10 s build process, so the long wait starts from its beginning.
    node.spawn_orphan("ninja", seconds=10)
    long_run = run_playbook(PREFLIGHT, fleet.inventory_path, args=["--limit", "node1"], extra_vars=dict(
        POLICY, preflight_wait=60, preflight_interval=1, preflight_report_dir=str(tmp_path / "long")))
    assert long_run.rc == 0, long_run.stdout[-2000:]
    with open(str(tmp_path / "long" / "preflight.json")) as handle:
        entry = json.load(handle)["hosts"]["node1"]
    TIMINGS["wait_until_ready_seconds"] = entry["waited_seconds"]
    assert entry["status"] == "ready"
    # Ready about when the sleeper exits (10 s after it started; ansible's start-up eats part of that).
    assert 5 <= entry["waited_seconds"] <= 12, entry["waited_seconds"]


def test_reports_say_what_the_playbook_said(fleet, tmp_path):
    bad = three_bad_nodes(fleet)
    result = run_playbook(PREFLIGHT, fleet.inventory_path, extra_vars=dict(POLICY, preflight_report_dir=str(tmp_path)))
    with open(str(tmp_path / "preflight.json")) as handle:
        report = json.load(handle)
    not_ready = set(name for name, e in report["hosts"].items() if e["status"] != "ready")
    assert not_ready == bad

    junit = ElementTree.parse(str(tmp_path / "preflight.xml")).getroot()
    suites = dict((s.get("name"), s) for s in junit.findall("testsuite"))
    assert set(suites) == set(report["hosts"])
    for name, suite in suites.items():
        broken = int(suite.get("failures")) + int(suite.get("errors"))
        assert (broken > 0) == (name in bad), name
    assert suites["node4"].find("testcase/error") is not None

    markdown = (tmp_path / "preflight.md").read_text()
    summary = "%d ready, 2 not ready, 1 unreachable (of %d)" % (len(fleet.nodes) - 3, len(fleet.nodes))
    assert summary in markdown and summary in result.stdout
    for name in bad:
        assert re.search(r"\| %s \| (not ready|unreachable) \|" % name, markdown)
    # The playbook failed exactly the not-ready hosts (unreachable ones are counted separately by Ansible).
    recap = dict(re.findall(r"^(node\d+)\s+: ok=\d+\s+changed=\d+\s+unreachable=\d+\s+failed=(\d+)", result.stdout, re.M))
    assert set(name for name, failed in recap.items() if failed != "0") == {"node2", "node3", "node4"}


def test_gate_provisions_exactly_the_ready_nodes(fleet, tmp_path):
    bad = three_bad_nodes(fleet)
    markers = tmp_path / "markers"
    markers.mkdir()
    result = run_playbook(GATED, fleet.inventory_path, extra_vars=dict(
        POLICY, gated_marker_dir=str(markers), preflight_report_dir=str(tmp_path / "r")))
    provisioned = set(p.name.replace("gpufleet-provisioned-", "") for p in markers.iterdir())
    assert provisioned == set(n.name for n in fleet.nodes) - bad, result.stdout[-3000:]


def test_gate_stops_the_run_when_too_many_are_not_ready(fleet, tmp_path):
    three_bad_nodes(fleet)
    markers = tmp_path / "markers"
    markers.mkdir()
    result = run_playbook(GATED, fleet.inventory_path, extra_vars=dict(
        POLICY, gated_marker_dir=str(markers), preflight_max_not_ready=2,
        preflight_report_dir=str(tmp_path / "r")))
    assert result.rc != 0
    assert list(markers.iterdir()) == []
    assert "Stopping the run: 3 of %d hosts are not ready or unreachable, more than preflight_max_not_ready=2 allows" % len(
        fleet.nodes) in result.stdout
    assert "PLAY [Provision the ready nodes]" not in result.stdout or "skipping: no hosts matched" in result.stdout \
        or "NO MORE HOSTS LEFT" in result.stdout
    with open(str(tmp_path / "r" / "preflight.json")) as handle:
        assert json.load(handle)["summary"]["ready"] == len(fleet.nodes) - 3


def test_bad_max_not_ready_is_named(fleet, tmp_path):
    result = run_playbook(PREFLIGHT, fleet.inventory_path, args=["--limit", "node1"], extra_vars=dict(
        POLICY, preflight_max_not_ready="a few", preflight_report_dir=str(tmp_path)))
    assert result.rc != 0
    assert "preflight_max_not_ready: 'a few' is neither a count of hosts (like 2) nor a percentage (like 25%)" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
