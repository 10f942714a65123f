# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gate's contract, per preflight_drop_mode, on the real fleet (issue 27 item 1): a node that is not ready never
runs a later play of the run; end_host exits 0 when the gate passes; a gate that stops exits non-zero in every mode;
zero ready nodes stop the run. The policy comes from the inventory (group_vars, and a host var of 1000GiB on node3),
never from extra vars, which would beat it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from fleetlib import REPO_ROOT, run_playbook

PLAYBOOK = os.path.join(REPO_ROOT, "tests", "fleet", "playbooks", "gate_multi_play.yml")
NODES = ("node1", "node2", "node3", "node4")
READY = {"node1", "node4"}   # node2: an orphaned ninja; node3: its host var asks for 1000GiB
PLAYS = ("provisioned", "configured")


def inventory(fleet, path, hosts=NODES, host_vars=None):
    """The fleet's inventory for ``hosts``: the policy as group vars, node3's 1000GiB as a host var."""
    data = fleet.inventory()
    data["all"]["hosts"] = dict((name, data["all"]["hosts"][name]) for name in hosts)
    data["all"]["vars"].update(preflight_profiles=[], preflight_min_available_memory="64MiB",
                               preflight_max_memory_pressure=100)
    if "node3" in hosts:
        data["all"]["hosts"]["node3"]["preflight_min_available_memory"] = "1000GiB"
    for name, variables in (host_vars or {}).items():
        data["all"]["hosts"][name].update(variables)
    with open(str(path), "w") as handle:
        yaml.safe_dump(data, handle)
    return str(path)


def run(fleet, tmp_path, hosts=NODES, host_vars=None, **extra):
    markers = tmp_path / "markers"
    markers.mkdir()
    if "node2" in hosts:
        fleet["node2"].spawn_orphan("ninja")
    result = run_playbook(PLAYBOOK, inventory(fleet, tmp_path / "inventory.yml", hosts, host_vars),
                          extra_vars=dict(extra, gated_marker_dir=str(markers), preflight_report_dir=str(tmp_path / "r")))
    (tmp_path / "stdout.txt").write_text(result.stdout)
    ran = dict((play, set(p.name[len("gpufleet-%s-" % play):] for p in markers.iterdir()
                          if p.name.startswith("gpufleet-%s-" % play))) for play in PLAYS)
    return result, ran


@pytest.mark.parametrize("mode, rc", [("fail", 2), ("end_host", 0)])
def test_a_passing_gate_runs_the_later_plays_on_the_ready_nodes_only(fleet, tmp_path, mode, rc):
    result, ran = run(fleet, tmp_path, preflight_drop_mode=mode, preflight_max_not_ready=2)
    out = result.stdout
    assert result.rc == rc, out[-4000:]
    assert ran == {"provisioned": READY, "configured": READY}, out[-4000:]
    assert "below the 1.0Ti required" in out, out[-4000:]   # node3: its host var of 1000GiB, no play var beat it
    # What the summary says happens next matches what happened (no bare "Gate: continue" before a failing run).
    if mode == "fail":
        assert "node2, node3 FAIL now (preflight_drop_mode fail), so ansible-playbook exits 2" in out, out[-4000:]
    else:
        assert "node2, node3 leave this play (preflight_drop_mode end_host, counted as ignored in the recap): the run exits 0" in out, out[-4000:]


@pytest.mark.parametrize("mode", ["fail", "end_host"])
def test_a_gate_that_stops_exits_non_zero_and_provisions_nobody(fleet, tmp_path, mode):
    result, ran = run(fleet, tmp_path, preflight_drop_mode=mode, preflight_max_not_ready=1)
    assert result.rc != 0, result.stdout[-4000:]
    assert ran == {"provisioned": set(), "configured": set()}, result.stdout[-4000:]
    assert "Stopping the run: 2 of 4 hosts are not ready or unreachable, more than preflight_max_not_ready=1 allows" \
        in result.stdout


@pytest.mark.parametrize("mode", ["fail", "end_host"])
def test_zero_ready_nodes_stop_the_run_and_say_so(fleet, tmp_path, mode):
    """node3 alone, asking for 1000GiB in its host vars: end_host exited 0 having provisioned nobody."""
    result, ran = run(fleet, tmp_path, hosts=("node3",), preflight_drop_mode=mode)
    assert result.rc != 0, result.stdout[-4000:]
    assert ran == {"provisioned": set(), "configured": set()}, result.stdout[-4000:]
    assert "Stopping the run: none of the 1 host is ready: nothing to go on with" in result.stdout, result.stdout[-4000:]
    assert "below the 1.0Ti required" in result.stdout   # the host var (1000GiB), not the role default 8GiB


def test_a_bad_drop_mode_is_named(fleet, tmp_path):
    result, ran = run(fleet, tmp_path, hosts=("node1",), preflight_drop_mode="skip")
    assert result.rc != 0 and ran == {"provisioned": set(), "configured": set()}
    assert "value of preflight_drop_mode must be one of: fail, end_host, got: skip" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_end_host_leaves_an_unreachable_node_out_and_exits_0(fleet, tmp_path):
    """node4's sshd stopped: counted not ready, never provisioned, and the passing gate still exits 0."""
    fleet["node4"].stop_sshd()
    result, ran = run(fleet, tmp_path, preflight_drop_mode="end_host", preflight_max_not_ready=3)
    assert result.rc == 0, result.stdout[-4000:]
    assert ran == {"provisioned": {"node1"}, "configured": {"node1"}}, result.stdout[-4000:]


def test_a_run_that_only_records_verdicts_is_not_stopped_by_zero_ready(fleet, tmp_path):
    """preflight_fail_when_not_ready false: nothing is dropped, nothing stops; still nobody joins the ready group."""
    result, ran = run(fleet, tmp_path, hosts=("node3",), preflight_fail_when_not_ready=False)
    assert result.rc == 0, result.stdout[-4000:]
    assert ran == {"provisioned": set(), "configured": set()}, result.stdout[-4000:]


CLEAN_END = "TASK [End the preflight play when every node is ready and nothing is left to publish or drop]"


def test_a_clean_run_ends_the_preflight_play_after_the_report_and_provisions_every_node(fleet, tmp_path):
    """Every node ready, nothing to publish: the play ends in the controller after the report (no publish include and
    no drop task, a worker per host each), and the ready group still carries every node into the later plays."""
    result, ran = run(fleet, tmp_path, hosts=("node1", "node4"), preflight_drop_mode="end_host")
    out = result.stdout
    assert result.rc == 0, out[-4000:]
    assert ran == {"provisioned": {"node1", "node4"}, "configured": {"node1", "node4"}}, out[-4000:]
    assert CLEAN_END in out, out[-4000:]
    assert "Drop a node that is not ready" not in out and "Drain or resume it in Slurm" not in out, out[-4000:]


def test_a_node_with_something_to_publish_is_not_ended_early(fleet, tmp_path):
    """Only node4's own host vars ask for metrics: the controller-side decision reads every host's variables, so
    node4's verdict is still written, and only node4's; a clean run otherwise."""
    metrics = tmp_path / "metrics-node4"
    metrics.mkdir()
    result, ran = run(fleet, tmp_path, hosts=("node1", "node4"), preflight_drop_mode="end_host",
                      host_vars={"node4": {"preflight_metrics_dir": str(metrics)}})
    out = result.stdout
    assert result.rc == 0, out[-4000:]
    assert ran == {"provisioned": {"node1", "node4"}, "configured": {"node1", "node4"}}, out[-4000:]
    assert "Drain or resume it in Slurm" in out, out[-4000:]
    assert "gpufleet_preflight_ready" in (metrics / "gpufleet_preflight_playbook.prom").read_text(), out[-4000:]
    assert sorted(os.listdir(str(metrics))) == ["gpufleet_preflight_playbook.prom"], out[-4000:]
