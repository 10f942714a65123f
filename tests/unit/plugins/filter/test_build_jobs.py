# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.preflight.plugins.filter.build_jobs import FilterModule

GI = 1024 ** 3
SEED = {"effective": {"total_bytes": 449 * GI, "available_bytes": 448 * GI}}
build_jobs = FilterModule().filters()["build_jobs"]


@pytest.mark.parametrize("kwargs, jobs, fits", [
    (dict(cpus=128, nvcc_threads=32), 2, True),
    (dict(cpus=128), 80, True),
    (dict(cpus={"usable": 128}, memory_per_thread="4GiB"), 100, True),
    (dict(cpus=128, nvcc_threads=32, memory_per_thread="200GiB"), 1, False),
])
def test_build_jobs(kwargs, jobs, fits):
    plan = build_jobs(SEED, **kwargs)
    assert (plan["jobs"], plan["fits"]) == (jobs, fits)
    assert plan["reason"].startswith("jobs=%d:" % jobs if fits else "does not fit:")


@pytest.mark.parametrize("facts, kwargs, message", [
    (SEED, {}, "cpus is required"),
    (SEED, dict(cpus=4, nvcc_threads="thirty"), "nvcc_threads must be a whole number"),
    ({}, dict(cpus=4), "no 'effective' section"),
])
def test_build_jobs_errors(facts, kwargs, message):
    with pytest.raises(AnsibleFilterError) as err:
        build_jobs(facts, **kwargs)
    assert message in str(err.value)


def test_a_measured_memory_per_thread_is_planned_with_its_margin():
    """Issue 14 item 4: the value guarded_build's stamp keeps (measured.memory_per_thread_bytes) passed through."""
    from ansible_collections.gpufleet.preflight.plugins.filter.build_jobs import build_jobs as plan  # pylint: disable=import-outside-toplevel
    facts = {"effective": {"available_bytes": 448 * 1024 ** 3, "total_bytes": 449 * 1024 ** 3}}
    learned = plan(facts, cpus=128, nvcc_threads=32, measured_memory_per_thread=2 * 1024 ** 3)
    assert learned["jobs"] == 4 and "measured 2Gi/thread + 25%" in learned["reason"]
    assert plan(facts, cpus=128, nvcc_threads=32, measured_memory_per_thread=None)["jobs"] == 2


@pytest.mark.parametrize("facts, kwargs, message", [
    # the bad-input sweep's cases (tests/sweep/cases/filters.yml): each refused naming what is wrong, never a
    # TypeError/AttributeError out of the filter
    ({"gpufleet_memory": "x"}, dict(cpus=8), "gpufleet_memory must be the memory facts dict"),
    ({"gpufleet_memory": None}, dict(cpus=8), "gpufleet_memory must be the memory facts dict"),
    (SEED, dict(cpus=8, nosuch=1), "unknown option nosuch"),
    (SEED, dict(cpus=8, nosuch=1, other=2), "unknown options nosuch, other"),
    (SEED, dict(cpus=1e99), "cpus must be at most 65536, got 1e+99"),
    (SEED, dict(cpus={"gpufleet_cpus": "x"}), "cpus: gpufleet_cpus must be the cpus facts dict"),
    (SEED, dict(cpus=8, nvcc_threads=1e99), "nvcc_threads must be at most 1024"),
    (SEED, dict(cpus=8, memory_per_thread="64GB"), "memory_per_thread: '64GB' is ambiguous"),
    (SEED, dict(cpus=8, memory_per_thread="5 GiB"), "memory_per_thread: '5 GiB' is not a size"),
    (SEED, dict(cpus=8, reserve="64GB"), "reserve: '64GB' is ambiguous"),
    ({"effective": {"available_bytes": "64GB", "total_bytes": "64GB"}}, dict(cpus=8),
     "effective.available_bytes: '64GB' is ambiguous"),
    ({"effective": {"available_bytes": True, "total_bytes": 1}}, dict(cpus=8), "effective.available_bytes: True"),
])
def test_build_jobs_refuses_bad_input_naming_it(facts, kwargs, message):
    with pytest.raises(AnsibleFilterError) as err:
        build_jobs(facts, **kwargs)
    assert message in str(err.value)
