# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

"""Fixtures for the scheduler stage: a private network namespace holding an 8-node fleet and a real Slurm cluster.

``cluster`` (session): the test process enters a network namespace of its own (nothing binds the host's interfaces),
starts a fleet of 8 sshd nodes, munged, slurmctld and one slurmd inside each node, and stops every one by pid at the
end. Without root, unshare, sshd or Slurm the tests skip saying why -- except with CI=true, where they fail.
"""

import collections
import fcntl
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from fleetlib import REPO_ROOT, TIMINGS, Fleet, FleetError, NetNamespace, SlurmCluster, run_playbook, slurm_missing_prerequisites  # noqa: E402 pylint: disable=wrong-import-position
from needs import require, stop_all  # noqa: E402 pylint: disable=wrong-import-position

SIZE = 8
HEALTH_CHECK_INTERVAL = 2
PLAYBOOK = os.path.join(REPO_ROOT, "tests", "scheduler", "playbooks", "health_check.yml")
POLICY = {"profiles": [], "min_available_memory": "64MiB", "max_memory_pressure": 100,
          "custom_checks": [{"name": "few_processes", "query": "build_processes.count", "max": 5}]}

Cluster = collections.namedtuple("Cluster", "fleet slurm netns")


@pytest.fixture(scope="session")
def cluster():
    require("the scheduler tests", slurm_missing_prerequisites())
    netns = NetNamespace().start().enter()
    fleet = slurm = None
    try:
        fleet = Fleet().start(SIZE)
        slurm = SlurmCluster(fleet, health_check_interval=HEALTH_CHECK_INTERVAL).start()
    except FleetError as exc:
        for part in (slurm, fleet, netns):
            if part is not None:
                part.stop()
        pytest.fail("the Slurm test cluster did not come up: %s" % exc, pytrace=False)
    TIMINGS["fleet_and_slurm_start_seconds"] = fleet.timings["start_seconds"] + fleet.timings["slurm_start_seconds"]
    yield Cluster(fleet, slurm, netns)
    stop_all((slurm, fleet, netns), errors=(FleetError,))


@pytest.fixture
def slurm_idle(cluster):  # pylint: disable=redefined-outer-name
    """Every node idle and undrained, no records of ours, before and after the test."""
    def reset():
        cluster.slurm.ensure_running(cluster.fleet.nodes)
        wait_for_checks_in_flight(STATE_DIR(cluster))
        for node in cluster.fleet.nodes:
            cluster.slurm.scontrol("update", "NodeName=%s" % node.name, "State=RESUME")
        for name in os.listdir(STATE_DIR(cluster)):
            os.unlink(os.path.join(STATE_DIR(cluster), name))
        cluster.slurm.command(["scancel", "--quiet", "--partition=build"])
        cluster.slurm.wait_states(dict((n.name, "idle") for n in cluster.fleet.nodes), 40)
    reset()
    yield cluster
    reset()


@pytest.fixture(scope="module")
def installed(cluster, tmp_path_factory):  # pylint: disable=redefined-outer-name
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


def wait_for_checks_in_flight(state_dir, seconds=60):
    """Until no health check holds its node's lock: one started under a test's policy (which the test has put back
    by now) would otherwise drain or resume after the reset. Twice, for a run that read the old policy just before
    the first pass and took its lock just after."""
    deadline = time.monotonic() + seconds
    for _pass in range(2):
        for name in sorted(os.listdir(state_dir)):
            if not name.endswith(".lock"):
                continue
            while True:
                try:
                    fd = os.open(os.path.join(state_dir, name), os.O_RDONLY)
                except OSError:
                    break
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        pytest.fail("a health check still holds %s after %d s" % (name, seconds), pytrace=False)
                    time.sleep(0.05)
                finally:
                    os.close(fd)
        time.sleep(0.2)


def STATE_DIR(one):  # pylint: disable=invalid-name
    path = os.path.join(one.fleet.dir, "gpufleet-state")
    if not os.path.isdir(path):
        os.makedirs(path)
    return path


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.write_sep("-", "gpufleet scheduler timings")
        for key in sorted(TIMINGS):
            terminalreporter.write_line("%s: %.2fs" % (key, TIMINGS[key]))
