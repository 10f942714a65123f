# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health_check role on the fleet: slurmd itself running the installed program as HealthCheckProgram (drain on
turning not ready, resume on recovery), the node-problem-detector contract, cron, and custom checks without jmespath."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

import pytest

from conftest import STATE_DIR
from fleetlib import REPO_ROOT, TIMINGS, install_gpus, run_playbook

PLAYBOOK = os.path.join(REPO_ROOT, "tests", "scheduler", "playbooks", "health_check.yml")
POLICY = {"profiles": [], "min_available_memory": "64MiB", "max_memory_pressure": 100,
          "custom_checks": [{"name": "few_processes", "query": "build_processes.count", "max": 5}]}


@pytest.fixture(scope="module")
def installed(cluster, tmp_path_factory):
    """The role applied to every node, the program where slurmd's HealthCheckProgram wrapper looks for it."""
    base = str(tmp_path_factory.mktemp("health_check"))
    extra = dict(health_check_policy=POLICY, health_check_install_dir=os.path.join(base, "lib"),
                 health_check_config=os.path.join(base, "etc", "health_check.json"),
                 health_check_program=cluster.slurm.health_check_target, health_check_schedule="cron",
                 health_check_cron_file=os.path.join(base, "cron.d", "gpufleet-health-check"),
                 health_check_slurm_conf=cluster.slurm.conf, health_check_slurm_state_dir=STATE_DIR(cluster),
                 health_check_metrics_dir=None)
    os.makedirs(os.path.join(base, "cron.d"))
    # The nodes share this machine's filesystem: installing on one installs for every slurmd.
    result = run_playbook(PLAYBOOK, cluster.fleet.inventory_path, extra_vars=extra, args=["--limit", "node1"])
    TIMINGS["health_check_role_seconds"] = result.duration
    assert result.rc == 0, result.stdout[-4000:]
    yield dict(extra, base=base, stdout=result.stdout)
    os.unlink(cluster.slurm.health_check_target)  # slurmd's wrapper runs nothing again


def test_slurmd_drains_and_resumes_through_the_health_check(installed, slurm_idle):
    cluster = slurm_idle
    slurm = cluster.slurm
    slurm.scontrol("update", "NodeName=node1", "State=DRAIN", "Reason=admin: bad fan")
    admin = slurm.node_info("node1")
    pid = cluster.fleet["node3"].spawn_orphan("ninja")
    started = time.monotonic()
    slurm.wait_states({"node3": "drained"}, 30)
    TIMINGS["health_check_drain_seconds"] = time.monotonic() - started
    info = slurm.node_info("node3")
    assert info["reason"].startswith("gpufleet: build_processes: 1 build process still running"), info
    cluster.fleet["node3"].run("kill -9 %d" % pid, check=True)
    slurm.wait_states({"node3": "idle"}, 30)
    time.sleep(3)  # a few more health checks: the admin's drain stays
    assert slurm.node_info("node1") == admin
    assert slurm.node_info("node2")["state"] == "idle"


def test_npd_contract_and_custom_checks_without_jmespath(installed, cluster):
    node = cluster.fleet["node2"]
    program = installed["health_check_program"]
    ready = node.run("%s --mode npd -v" % program)
    assert ready.rc == 0, ready
    lines = ready.stdout.splitlines()
    assert lines[0].startswith("ready:") and len(lines[0]) <= 80
    assert "few_processes: not applied: the jmespath Python library is not installed" in ready.stdout
    pid = node.spawn_orphan("ninja")
    try:
        bad = node.run("%s --mode npd" % program)
    finally:
        node.run("kill -9 %d" % pid)
    assert bad.rc == 1, bad
    first = bad.stdout.splitlines()[0]
    assert first == "not ready: build_processes: 1 build process still running" and len(first) <= 80
    # the same message as the playbook's readiness check (one implementation)
    assert "failed build_processes: 1 build process still running: ninja (pid %d, orphaned" % pid in bad.stdout
    # a hung nvidia-smi: unknown (2)
    gpu_config = os.path.join(installed["base"], "gpu.json")
    with open(gpu_config, "w") as handle:
        handle.write('{"policy": {"profiles": ["gpu"], "min_available_memory": "64MiB", "gpu_timeout": 1, '
                     '"max_memory_pressure": 100}}')
    install_gpus(node, hang=True)
    hung = node.run("%s --mode npd --config %s" % (program, gpu_config))
    node.dirty = False
    assert hung.rc == 2, hung
    assert len(hung.stdout.splitlines()[0]) <= 80


def test_cron_file(installed):
    with open(installed["health_check_cron_file"]) as handle:
        text = handle.read()
    assert "*/5 * * * * root %s --mode check" % installed["health_check_program"] in text
