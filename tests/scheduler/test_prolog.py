# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health check as Slurm's Prolog (issue 38 item 3), on the real slurmctld: a job sent to a node that fails the
fast subset never starts there (Slurm requeues it, the node drained with our reason); on a ready node it runs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

import pytest

from conftest import STATE_DIR
from fleetlib import REPO_ROOT, TIMINGS, run_playbook

PLAYBOOK = os.path.join(REPO_ROOT, "tests", "scheduler", "playbooks", "health_check.yml")
POLICY = {"profiles": [], "min_available_memory": "64MiB", "max_memory_pressure": 100}


@pytest.fixture(scope="module")
def prolog(cluster, tmp_path_factory):
    """The role's program (schedule none) and Slurm's Prolog running it with --mode prolog."""
    base = str(tmp_path_factory.mktemp("prolog"))
    program = os.path.join(base, "bin", "gpufleet-health-check")
    extra = dict(health_check_policy=POLICY, health_check_install_dir=os.path.join(base, "lib"),
                 health_check_config=os.path.join(base, "etc", "health_check.json"), health_check_program=program,
                 health_check_schedule="none", health_check_slurm_conf=cluster.slurm.conf,
                 health_check_slurm_state_dir=STATE_DIR(cluster), health_check_metrics_dir=None)
    result = run_playbook(PLAYBOOK, cluster.fleet.inventory_path, extra_vars=extra, args=["--limit", "node1"])
    assert result.rc == 0, result.stdout[-4000:]
    with open(cluster.slurm.prolog_target, "w") as handle:
        handle.write("#!/bin/sh\nexec %s --mode prolog >>%s/prolog.log 2>&1\n" % (program, base))
    os.chmod(cluster.slurm.prolog_target, 0o755)
    yield dict(base=base, program=program)
    os.unlink(cluster.slurm.prolog_target)


def submit(slurm, node, marker):
    return slurm.command(["sbatch", "--parsable", "-w", node, "--chdir=/tmp", "-o", "/dev/null",
                          "--wrap", "touch %s" % marker]).stdout.strip()


def test_a_job_never_starts_on_a_node_failing_the_prolog(prolog, slurm_idle):
    cluster = slurm_idle
    slurm = cluster.slurm
    bad = os.path.join(prolog["base"], "ran-on-node6")
    good = os.path.join(prolog["base"], "ran-on-node7")
    pid = cluster.fleet["node6"].spawn_orphan("ninja")
    jobs = []
    try:
        started = time.monotonic()
        jobs.append(submit(slurm, "node6", bad))
        slurm.wait_states({"node6": "drained"}, 30)
        TIMINGS["prolog_drain_seconds"] = time.monotonic() - started
        info = slurm.node_info("node6")
        jobs.append(submit(slurm, "node7", good))
        deadline = time.monotonic() + 20
        while not os.path.exists(good) and time.monotonic() < deadline:
            time.sleep(0.2)
        state = slurm.command(["squeue", "-h", "-j", jobs[0], "-o", "%T|%r"]).stdout.strip()
        later = slurm.node_info("node6")  # Slurm's own drain for a failed Prolog keeps our reason
        with open(os.path.join(prolog["base"], "prolog.log")) as handle:
            log = handle.read()
        assert os.path.exists(good), log        # a ready node passes its prolog and runs the job
        assert not os.path.exists(bad), (state, log)   # never started on node6
        assert state.startswith("PENDING"), (state, log)   # requeued by Slurm's own rules
        assert info["reason"].startswith("gpufleet: build_processes: 1 build process still running"), (info, log)
        assert later["reason"] == info["reason"] and later["state"] == "drained", (later, info)
    finally:
        cluster.fleet["node6"].run("kill -9 %d" % pid)
        if jobs:
            slurm.command(["scancel"] + jobs)
