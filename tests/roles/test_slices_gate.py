# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One gate over AWX slices (issue 38): two preflight runs as two slice jobs (each with its own awx_job_id, on this
host), their artifacts merged key by key as AWX merges slices' artifacts, then playbooks/slices_gate.yml decides
once: each slice alone passes its own gate, the fleet does not."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from fleetlib import REPO_ROOT, run_playbook  # noqa: E402 pylint: disable=wrong-import-position

PREFLIGHT = os.path.join(REPO_ROOT, "playbooks", "preflight.yml")
GATE = os.path.join(REPO_ROOT, "playbooks", "slices_gate.yml")
LOCAL = dict(ansible_python_interpreter=sys.executable, ansible_connection="local", preflight_hosts="localhost",
             preflight_profiles=[], preflight_max_memory_pressure=100, preflight_max_build_processes=100000,
             preflight_write_reports=False, preflight_drop_mode="end_host")
STATS = {"ANSIBLE_SHOW_CUSTOM_STATS": "1"}


def stats(stdout):
    match = re.search(r"^\s*RUN: (\{.*\})\s*$", stdout, re.M)
    assert match, stdout[-3000:]
    return json.loads(match.group(1))


def slice_job(job_id, memory):
    result = run_playbook(PREFLIGHT, "localhost,", extra_vars=dict(LOCAL, awx_job_id=job_id,
                                                                   preflight_min_available_memory=memory), env=STATS)
    return result, stats(result.stdout)


def test_one_gate_over_slices(tmp_path):
    artifacts = {}
    good, good_stats = slice_job(101, "64MiB")
    bad, bad_stats = slice_job(102, "1024TiB")
    for run, published in ((good, good_stats), (bad, bad_stats)):
        assert run.rc == 0 or "none of the 1 host is ready" in run.stdout, run.stdout[-3000:]
        artifacts.update(published)   # AWX: the slices' artifacts, one dict, key by key (the last slice wins a key)
    assert artifacts["gpufleet_preflight_slice_101"] == dict(ready=["localhost"], not_ready=[], total=1)
    assert artifacts["gpufleet_preflight_slice_102"] == dict(ready=[], not_ready=["localhost"], total=1)
    assert artifacts["gpufleet_preflight"]["not_ready"] == ["localhost"]   # the shared key: only the last slice's
    # the same host in two slices: not ready wins; with a limit of 0 not ready over the fleet, the gate stops
    stop = run_playbook(GATE, "localhost,", extra_vars=dict(artifacts, slices_max_not_ready=0, slices_expected=2),
                        env=STATS)
    assert stop.rc == 2 and "Fleet gate over 2 slices: STOP" in stop.stdout, stop.stdout[-3000:]
    # two slices of different hosts, as AWX slices an inventory: one gate over both
    artifacts["gpufleet_preflight_slice_102"] = dict(ready=[], not_ready=["gpu2"], total=1)
    go = run_playbook(GATE, "localhost,", extra_vars=dict(artifacts, slices_max_not_ready="50%"), env=STATS)
    assert go.rc == 0, go.stdout[-3000:]
    fleet = stats(go.stdout)["gpufleet_preflight_fleet"]
    assert fleet["gate"]["decision"] == "continue" and fleet["total"] == 2 and fleet["not_ready"] == ["gpu2"]
    assert fleet["slices"] == ["101", "102"]
    missing = run_playbook(GATE, "localhost,", extra_vars=dict(artifacts, slices_expected=3), env=STATS)
    assert missing.rc == 2 and "2 of 3 slices published" in missing.stdout, missing.stdout[-3000:]
