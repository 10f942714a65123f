# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

"""Fixtures for fleet tests.

- ``fleet_session``: one fleet of GPUFLEET_FLEET_SIZE nodes (default 8) for the whole session.
- ``fleet``: that same fleet, with every node an earlier test injected a fault into (or that
  is down) restarted fresh before the test -- so faults are per test and cost one node restart.
- ``fleet_capable``: only the skip/fail check, for tests that manage a Fleet themselves.
- ``fresh_fleet``: a factory, ``fresh_fleet(n)`` -> a new started Fleet, stopped after the test.
- ``run_playbook`` / ``run_adhoc`` (plain functions, from fleetlib): the project's ansible-playbook
  / ansible with ANSIBLE_CONFIG and ANSIBLE_COLLECTIONS_PATH set; CommandResult(rc, stdout, stderr, duration).

Without root, unshare or sshd the fleet tests skip with the reason -- except when CI=true,
where they fail (CI must never pass by skipping them).
"""

import os
import sys

import pytest

# fleetlib lives in tests/tools, shared with bench/ (which must not import from a test folder of its own).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from fleetlib import TIMINGS, Fleet, FleetError, fleet_size_from_env, missing_prerequisites, run_adhoc, run_playbook  # noqa: F401,E402 pylint: disable=unused-import,wrong-import-position


def _require_fleet():
    problems = missing_prerequisites()
    if not problems:
        return
    reason = "fleet tests need: " + "; ".join(problems)
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " (CI=true: failing instead of skipping)", pytrace=False)
    pytest.skip(reason)


def _start(size):
    try:
        fleet = Fleet().start(size)
    except FleetError as exc:
        pytest.fail("fleet did not come up: %s" % exc, pytrace=False)
    TIMINGS.setdefault("start_seconds_%d_nodes" % size, fleet.timings["start_seconds"])
    return fleet


@pytest.fixture
def fleet_capable():
    """For tests that build their own Fleet: skip (or fail on CI) where no fleet can run."""
    _require_fleet()


@pytest.fixture(scope="session")
def fleet_session():
    _require_fleet()
    fleet = _start(fleet_size_from_env())
    yield fleet
    fleet.stop()
    TIMINGS["stop_seconds_%d_nodes" % len(fleet.nodes)] = fleet.timings["stop_seconds"]


@pytest.fixture
def fleet(fleet_session):  # pylint: disable=redefined-outer-name
    fleet_session.heal()
    return fleet_session


@pytest.fixture
def fresh_fleet():
    _require_fleet()
    started = []

    def make(size=2):
        started.append(_start(size))
        return started[-1]

    yield make
    errors = []
    for one in started:
        try:
            one.stop()
        except FleetError as exc:
            errors.append(str(exc))
    if errors:
        pytest.fail("; ".join(errors), pytrace=False)


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.write_sep("-", "gpufleet test fleet timings")
        for key in sorted(TIMINGS):
            terminalreporter.write_line("%s: %.2fs" % (key, TIMINGS[key]))
