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

import json
import os
import shutil
import sys
import time

import pytest

# fleetlib lives in tests/tools, shared with bench/ (which must not import from a test folder of its own).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from fleetlib import REPO_ROOT, TIMINGS, Fleet, FleetError, fleet_size_from_env, missing_prerequisites, run_adhoc, run_playbook  # noqa: F401,E402 pylint: disable=unused-import,wrong-import-position
from needs import require, stop_all  # noqa: E402 pylint: disable=wrong-import-position


def _require_fleet():
    require("fleet tests", missing_prerequisites())


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
    stop_all(started, FleetError)


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.write_sep("-", "gpufleet test fleet timings")
        for key in sorted(TIMINGS):
            terminalreporter.write_line("%s: %.2fs" % (key, TIMINGS[key]))


# ---------------------------------------------------------------- the build view's fleet (test_build_view_fleet, test_build_stop_fleet)
PHASES = ("queued", "configuring", "compiling", "linking", "installing", "done", "failed", "unreachable")

HUNGRY = os.path.join(REPO_ROOT, "tests", "projects", "hungry")
BACKING_OFF = ("node3", "node6")
HUNGRY_STEPS = 12


def hungry_source(tmp_path):
    """The hungry project with the pyproject.toml the role looks for (it builds with sgl_kernel_build_command)."""
    source = str(tmp_path / "hungry")
    shutil.copytree(HUNGRY, source)
    with open(os.path.join(source, "pyproject.toml"), "w") as handle:
        handle.write("[project]\nname = \"hungry\"\nversion = \"0\"\n")
    return source


def build_vars(tmp_path, source, **more):
    """Every node builds 12 steps of 120 MiB x 2 s under a 400 MiB limit: 2 jobs fit; the two BACKING_OFF nodes
    start at 4 jobs (480 MiB), are OOM-killed and resume with 2."""
    variables = {
        "sgl_kernel_gate": False,
        "sgl_kernel_build_deps": False,
        "sgl_kernel_install": False,
        "sgl_kernel_source_type": "controller",
        "sgl_kernel_controller_src": source,
        "sgl_kernel_checkout_dir": str(tmp_path) + "/src-{{ inventory_hostname }}",
        "sgl_kernel_subdir": "",
        "sgl_kernel_venv": os.path.join(REPO_ROOT, ".venv"),
        "sgl_kernel_target_archs": "all",
        "sgl_kernel_build_command": ["/bin/sh", "-c", "cmake -S . -B build -G Ninja -DHOG_MIB=120 -DHOG_SECONDS=2 "
                                     "-DHOG_STEPS=%d >/dev/null && cmake --build build" % HUNGRY_STEPS],
        "sgl_kernel_memory_limit": "400MiB",
        "sgl_kernel_memory_per_thread": "100MiB",
        "sgl_kernel_jobs": "{{ 4 if inventory_hostname in %s else 2 }}" % list(BACKING_OFF),
        "sgl_kernel_poll_interval": 2,
        "sgl_kernel_async": 900,
    }
    variables.update(more)
    return variables


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting for %s" % what)


def status_of(tmp_path, name):
    path = os.path.join(str(tmp_path), "src-%s" % name, "build", "gpufleet-build.status.json")
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return {}
