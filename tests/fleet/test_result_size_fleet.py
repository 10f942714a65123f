# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node's readiness result weighs by default (issue 27 item 5).

Ansible copies every registered result from its worker to the controller and templates it into the fleet report:
with every gathered fact it was 37 KB per node (kernel events, GPUs, toolchain, the verdict twice); cutting it
took a 500-node fleet_reports run from 13.9 s to 7.8 s. By default it is now the verdict, its checks and policy
and the two facts the reports and publishers read, about 8.3 KB on a node with 8 GPUs; full_facts brings the rest
back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from fleetlib import REPO_ROOT, install_gpus, run_playbook

PLAYBOOK = os.path.join(REPO_ROOT, "tests", "fleet", "playbooks", "readiness_result_size.yml")
# 8,336 bytes measured on a healthy 8-GPU test node (2026-12-03); room for a few more checks, not for facts.
MAX_RESULT_BYTES = 10 * 1000
DEFAULT_FACTS = ["gpufleet_build_processes", "gpufleet_memory", "gpufleet_readiness"]


def results(fleet, tmp_path, **extra):
    out = tmp_path / ("full" if extra else "default")
    out.mkdir()
    # The session's fleet keeps its nodes' cgroups: an earlier test's real OOM kill in node1 (3 minutes before, in a
    # whole-stage run) made it not ready for the next 60, and /proc/pressure/memory is the host's on cgroup v1 (the
    # other lane's VMs and compiles). A not-ready result is not the healthy one measured here: the OOM window is off
    # and any pressure passes (their subjects are test_reports_fleet's and the memory checks' own tests).
    extra_vars = dict(result_dir=str(out), preflight_min_available_memory="512MiB", preflight_build_path="/tmp",
                      preflight_min_free_disk="512MiB", preflight_min_free_inodes=1000,
                      preflight_oom_window_minutes=0, preflight_max_memory_pressure=100, **extra)
    run = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars=extra_vars)
    assert run.rc == 0, run.stdout + run.stderr
    return dict((node.name, (out / (node.name + ".json")).read_text()) for node in fleet.nodes)


def test_a_default_readiness_result_stays_small_and_full_facts_returns_every_fact(fleet, tmp_path):
    for node in fleet.nodes:
        install_gpus(node)   # the default profiles' fullest facts: 8 healthy Blackwell GPUs
    default = results(fleet, tmp_path)
    for name, text in sorted(default.items()):
        result = json.loads(text)
        assert len(text) <= MAX_RESULT_BYTES, "%s: %d bytes returned by default (budget %d): %s" % (
            name, len(text), MAX_RESULT_BYTES, sorted((k, len(json.dumps(v))) for k, v in result.items()))
        assert sorted(result["ansible_facts"]) == DEFAULT_FACTS
        assert result["ready"] is True and result["checks"] and result["policy"], "%s: %s" % (name, result.get("msg"))
        assert "checks" not in result["ansible_facts"]["gpufleet_readiness"]

    full = json.loads(results(fleet, tmp_path, preflight_full_facts=True)[fleet.nodes[0].name])
    for fact in ("gpufleet_gpus", "gpufleet_kernel_events", "gpufleet_toolchain", "gpufleet_disks"):
        assert fact in full["ansible_facts"], sorted(full["ansible_facts"])
    assert full["ansible_facts"]["gpufleet_readiness"]["checks"] == full["checks"]
