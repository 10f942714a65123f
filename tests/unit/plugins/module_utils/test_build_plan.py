# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_plan import (
    default_reserve,
    plan_from_facts,
    plan_jobs,
)

GI = 1024 ** 3
MI = 1024 ** 2
SEED = {"effective": {"total_bytes": 449 * GI, "available_bytes": 448 * GI, "limited_by": "host"}}


@pytest.mark.parametrize("total, reserve", [
    (449 * GI, int(449 * GI * 0.1)),   # 10 % wins on a big node
    (24 * GI, 8 * GI),                 # 8 GiB floor on a small one
    (80 * GI, 8 * GI),
])
def test_default_reserve(total, reserve):
    assert default_reserve(total) == reserve


@pytest.mark.parametrize("kwargs, jobs, fits, bound, reason_start", [
    # the seed's node: 32 nvcc threads per job -> 2 jobs, not the -j20 that OOM-killed it
    (dict(available_bytes=448 * GI, total_bytes=449 * GI, cpus=128, nvcc_threads=32), 2, True, "memory",
     "jobs=2: 448Gi available - 45Gi reserve over 32 threads x 5Gi"),
    # one thread per job and enough cpus -> 80 jobs
    (dict(available_bytes=448 * GI, total_bytes=449 * GI, cpus=128, nvcc_threads=1), 80, True, "memory",
     "jobs=80: 448Gi available - 45Gi reserve over 1 thread x 5Gi"),
    # same node, 64 cpus: cpus bind
    (dict(available_bytes=448 * GI, total_bytes=449 * GI, cpus=64, nvcc_threads=1), 64, True, "cpus", "jobs=64:"),
    # max_jobs caps
    (dict(available_bytes=448 * GI, total_bytes=449 * GI, cpus=128, max_jobs=20), 20, True, "max_jobs", "jobs=20:"),
    # a 24 GiB box: 24 - 8 reserve = 16 GiB -> 3 jobs of 5 GiB
    (dict(available_bytes=24 * GI, total_bytes=24 * GI, cpus=16), 3, True, "memory", "jobs=3:"),
    # cpus fewer than threads: still one job (slow, not dangerous)
    (dict(available_bytes=448 * GI, total_bytes=449 * GI, cpus=8, nvcc_threads=32), 1, True, "min_jobs", "jobs=1:"),
    # explicit reserve and per-thread sizes as strings
    (dict(available_bytes="400MiB", total_bytes="1GiB", cpus=8, memory_per_thread="150MiB", reserve="0"), 2, True,
     "memory", "jobs=2: 400Mi available - 0B reserve over 1 thread x 150Mi"),
    # budget below one job: fits false, clear reason
    (dict(available_bytes=12 * GI, total_bytes=16 * GI, cpus=16, nvcc_threads=2), 1, False, "min_jobs",
     "does not fit: 12Gi available - 8Gi reserve over 2 threads x 5Gi = 4Gi budget, below 1 job of 10Gi"),
    # available below the reserve
    (dict(available_bytes=4 * GI, total_bytes=16 * GI, cpus=16), 1, False, "min_jobs", "does not fit:"),
    # min_jobs above what memory allows
    (dict(available_bytes=24 * GI, total_bytes=24 * GI, cpus=16, min_jobs=4), 4, False, "min_jobs", "does not fit:"),
])
def test_plan_jobs(kwargs, jobs, fits, bound, reason_start):
    plan = plan_jobs(**kwargs)
    assert plan["jobs"] == jobs
    assert plan["fits"] is fits
    assert plan["bound_by"] == bound
    assert plan["reason"].startswith(reason_start), plan["reason"]
    if fits:
        assert plan["jobs"] * plan["per_job_bytes"] <= plan["budget_bytes"]


def test_seed_budget_numbers():
    plan = plan_jobs(448 * GI, 449 * GI, 128, nvcc_threads=32)
    assert plan["budget_bytes"] == 448 * GI - int(449 * GI * 0.1)
    assert plan["per_job_bytes"] == 160 * GI
    assert plan["concurrent_threads"] == 64
    assert plan["memory_jobs"] == 2 and plan["cpu_jobs"] == 4


@pytest.mark.parametrize("facts, cpus, jobs", [
    (SEED, 128, 2),
    ({"gpufleet_memory": SEED, "gpufleet_cpus": {"usable": 128}}, {"usable": 128}, 2),
    (SEED, {"gpufleet_cpus": {"usable": 32}}, 1),
    (SEED, "64", 2),
])
def test_plan_from_facts(facts, cpus, jobs):
    assert plan_from_facts(facts, cpus, nvcc_threads=32)["jobs"] == jobs


@pytest.mark.parametrize("facts, cpus, kwargs, message", [
    (SEED, "many", {}, "cpus must be a whole number"),
    (SEED, 0, {}, "cpus must be at least 1"),
    (SEED, 8, {"nvcc_threads": "x"}, "nvcc_threads must be a whole number"),
    (SEED, 8, {"memory_per_thread": "lots"}, "memory_per_thread:"),
    (SEED, 8, {"memory_per_thread": 0}, "memory_per_thread must be more than 0"),
    (SEED, 8, {"min_jobs": 4, "max_jobs": 2}, "max_jobs (2) is below min_jobs (4)"),
    (SEED, 8, {"max_jobs": True}, "max_jobs must be a whole number"),
    ({"host": {}}, 8, {}, "no 'effective' section"),
    ({"effective": {"total_bytes": 1}}, 8, {}, "lack effective.available_bytes"),
    ("448Gi", 8, {}, "must be the gpufleet_memory dict"),
    # the bad-input sweep (tests/sweep/cases/filters.yml): validation that names the value at fault
    ({"gpufleet_memory": ["x"]}, 8, {}, "gpufleet_memory must be the memory facts dict, got list"),
    (SEED, {"gpufleet_cpus": None}, {}, "gpufleet_cpus must be the cpus facts dict"),
    (SEED, 1e99, {}, "cpus must be at most 65536, got 1e+99"),
    (SEED, 99999999999999999999, {}, "cpus must be at most 65536, got 99999999999999999999"),
    (SEED, 8, {"nvcc_threads": 2048}, "nvcc_threads must be at most 1024"),
    (SEED, 8, {"min_jobs": 5000}, "min_jobs must be at most 4096"),
    (SEED, 8, {"memory_per_thread": "64GB"}, "memory_per_thread: '64GB' is ambiguous"),
    (SEED, 8, {"memory_per_thread": "5 GiB"}, "memory_per_thread: '5 GiB' is not a size"),
    (SEED, 8, {"memory_per_thread": None}, "memory_per_thread: None is not a size"),
    (SEED, 8, {"reserve": "-1"}, "reserve: '-1' is not a size"),
    (SEED, 8, {"reserve": [1]}, "reserve: [1] is not a size"),
    ({"effective": {"available_bytes": float("nan"), "total_bytes": 1}}, 8, {}, "effective.available_bytes: nan"),
    ({"effective": {"available_bytes": 1.5, "total_bytes": 1}}, 8, {}, "effective.available_bytes: 1.5"),
])
def test_bad_input(facts, cpus, kwargs, message):
    with pytest.raises(ValueError) as err:
        plan_from_facts(facts, cpus, **kwargs)
    assert message in str(err.value)


@pytest.mark.parametrize("value, expected", [
    ("64GiB", 64 * 1024 ** 3), ("64G", 64 * 1024 ** 3), ("512MiB", 512 * 1024 ** 2), ("1.5GiB", 3 * 1024 ** 3 // 2),
    ("1048576", 1048576), (1048576, 1048576), (1048576.0, 1048576), (" 64GiB ", 64 * 1024 ** 3),
])
def test_sizes_in_binary_units_still_read(value, expected):
    assert plan_from_facts({"effective": {"available_bytes": value, "total_bytes": value}}, 8)["available_bytes"] == expected


# ---------------------------------------------------------------- the planner that learns (issue 14 item 4)

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_plan as learning  # noqa: E402 pylint: disable=wrong-import-position

_MI, _GI = 1024 ** 2, 1024 ** 3


@pytest.mark.parametrize("attempts, threads, expected", [
    ([], 1, None),
    ([{"kind": "oom", "jobs": 4, "peak_memory_bytes": 400 * _MI}], 1, None),        # a kill's peak is the limit
    ([{"kind": "oom", "jobs": 4, "peak_memory_bytes": 400 * _MI},
      {"kind": "ok", "jobs": 2, "peak_memory_bytes": 248 * _MI}], 1, 124 * _MI),
    ([{"kind": "ok", "jobs": 2, "peak_memory_bytes": 64 * _GI}], 4, 8 * _GI),           # jobs x nvcc threads
    ([{"kind": "ok", "jobs": 2, "peak_memory_bytes": None}], 1, None),
])
def test_measured_memory_per_thread(attempts, threads, expected):
    assert learning.measured_memory_per_thread(attempts, threads) == expected


@pytest.mark.parametrize("measured, margin, floor, expected, why", [
    (None, 1.25, _GI, 5 * _GI, None),
    ("", 1.25, _GI, 5 * _GI, None),
    (2 * _GI, 1.25, _GI, int(2.5 * _GI), "measured 2Gi/thread + 25%, not the default 5Gi"),
    ("3GiB", 1.5, _GI, int(4.5 * _GI), "measured 3Gi/thread + 50%, not the default 5Gi"),
    (124 * _MI, 1.25, _GI, _GI, "measured 124Mi/thread + 25%, raised to the floor 1Gi, not the default 5Gi"),
    (124 * _MI, 1.25, 64 * _MI, 155 * _MI, "measured 124Mi/thread + 25%, not the default 5Gi"),
])
def test_learned_memory_per_thread(measured, margin, floor, expected, why):
    assert learning.learned_memory_per_thread("5GiB", measured, margin, floor) == (expected, why)


@pytest.mark.parametrize("measured, margin, floor, message", [
    (0, 1.25, _GI, "measured_memory_per_thread must be more than 0"),
    ("lots", 1.25, _GI, "measured_memory_per_thread"),
    (_GI, 0.5, _GI, "measured_margin must be between 1 and 10"),
    (_GI, "x", _GI, "measured_margin must be a number"),
    (_GI, 1.25, "tiny", "min_memory_per_thread"),
])
def test_learned_memory_per_thread_bad_input(measured, margin, floor, message):
    with pytest.raises(ValueError, match=message):
        learning.learned_memory_per_thread("5GiB", measured, margin, floor)


def test_a_plan_from_a_measurement_says_so_and_fits_more_jobs():
    default = learning.plan_jobs(448 * _GI, 449 * _GI, 128, nvcc_threads=32)
    learned = learning.plan_jobs(448 * _GI, 449 * _GI, 128, nvcc_threads=32, measured_memory_per_thread=2 * _GI)
    assert default["jobs"] == 2 and default["memory_per_thread_source"] == "default"
    assert learned["jobs"] == 4 and learned["memory_per_thread_source"] == "measured"
    assert learned["memory_per_thread_bytes"] == int(2.5 * _GI)
    assert "(measured 2Gi/thread + 25%, not the default 5Gi)" in learned["reason"]
    assert "measured" not in default["reason"]
