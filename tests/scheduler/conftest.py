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
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from fleetlib import TIMINGS, Fleet, FleetError, NetNamespace, SlurmCluster, slurm_missing_prerequisites  # noqa: E402 pylint: disable=wrong-import-position

SIZE = 8
HEALTH_CHECK_INTERVAL = 2

Cluster = collections.namedtuple("Cluster", "fleet slurm netns")


def require(problems, what):
    if not problems:
        return
    reason = "%s need: %s" % (what, "; ".join(problems))
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " (CI=true: failing instead of skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def cluster():
    require(slurm_missing_prerequisites(), "the scheduler tests")
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
    errors = []
    for part in (slurm, fleet, netns):
        try:
            part.stop()
        except FleetError as exc:
            errors.append(str(exc))
    if errors:
        pytest.fail("; ".join(errors), pytrace=False)


@pytest.fixture
def slurm_idle(cluster):  # pylint: disable=redefined-outer-name
    """Every node idle and undrained, no records of ours, before and after the test."""
    def reset():
        cluster.slurm.ensure_running(cluster.fleet.nodes)
        for node in cluster.fleet.nodes:
            cluster.slurm.scontrol("update", "NodeName=%s" % node.name, "State=RESUME")
        for name in os.listdir(STATE_DIR(cluster)):
            os.unlink(os.path.join(STATE_DIR(cluster), name))
        cluster.slurm.command(["scancel", "--quiet", "--partition=build"])
        cluster.slurm.wait_states(dict((n.name, "idle") for n in cluster.fleet.nodes), 40)
    reset()
    yield cluster
    reset()


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
