# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._cpus import (
    collect_cpus,
    parse_cfs_quota,
    parse_cpu_list,
    parse_cpu_max,
    usable_cpus,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._cgroupfs import (
    cgroup_dir,
    parse_cgroup_mounts,
    parse_proc_cgroup,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "cpus")


@pytest.mark.parametrize("text, cpus", [
    ("0-3\n", [0, 1, 2, 3]),
    ("0-1,8,10-11", [0, 1, 8, 10, 11]),
    ("5", [5]),
    ("", []),
])
def test_parse_cpu_list(text, cpus):
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("quota, period, cpus", [
    ("-1\n", "100000\n", None),
    ("250000", "100000", 2.5),
    ("50000", "100000", 0.5),
])
def test_parse_cfs_quota(quota, period, cpus):
    assert parse_cfs_quota(quota, period) == cpus


@pytest.mark.parametrize("text, cpus", [
    ("max 100000\n", None),
    ("400000 100000\n", 4.0),
    ("150000 100000", 1.5),
])
def test_parse_cpu_max(text, cpus):
    assert parse_cpu_max(text) == cpus


@pytest.mark.parametrize("online, affinity, quota, usable", [
    (128, 128, None, 128),
    (128, 16, None, 16),        # taskset / cpuset
    (128, 128, 2.5, 2),         # quota floors
    (128, 128, 0.5, 1),         # never 0
    (None, None, None, 1),
])
def test_usable_cpus(online, affinity, quota, usable):
    assert usable_cpus(online, affinity, quota) == usable


def test_parse_proc_cgroup_and_mounts():
    paths = parse_proc_cgroup("4:cpu,cpuacct:/docker/abc\n12:memory:/docker/abc\n0::/x\n")
    assert paths == {"cpu": "/docker/abc", "cpuacct": "/docker/abc", "memory": "/docker/abc", "": "/x"}
    mounts = parse_cgroup_mounts(
        "33 31 0:30 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
        "40 31 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n"
        "41 31 0:38 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n")
    assert mounts["v1"]["cpu"] == ("/", "/sys/fs/cgroup/cpu,cpuacct")
    assert "name=systemd" not in mounts["v1"] and "xattr" in mounts["v1"]
    assert mounts["v2"] == [("/", "/sys/fs/cgroup/unified")]


@pytest.mark.parametrize("mount, path, directory", [
    (("/", "/sys/fs/cgroup/memory"), "/process_api/x", "/sys/fs/cgroup/memory/process_api/x"),
    (("/", "/sys/fs/cgroup"), "/", "/sys/fs/cgroup"),
    (("/kubepods/pod1", "/sys/fs/cgroup/memory"), "/kubepods/pod1/c1", "/sys/fs/cgroup/memory/c1"),
])
def test_cgroup_dir(mount, path, directory):
    assert cgroup_dir(mount, path) == directory


@pytest.mark.parametrize("tree, affinity, expected", [
    ("v1_quota", "0-15", {"online": 16, "affinity": 16, "quota_cpus": 2.5, "usable": 2}),
    ("v2_ns", "0-63", {"online": 64, "affinity": 64, "quota_cpus": 4.0, "usable": 4}),
    ("v2_nested", "0-7", {"online": 32, "affinity": 8, "quota_cpus": 6.0, "usable": 6}),
    ("v1_unlimited_host", "0-1", {"online": 2, "affinity": 2, "quota_cpus": None, "usable": 2}),
])
def test_collect_cpus_fixture_trees(tree, affinity, expected):
    facts = collect_cpus(root=os.path.join(FIXTURES, tree), affinity=affinity)
    assert {key: facts[key] for key in expected} == expected
    assert facts["errors"] == []


def test_collect_cpus_v1_quota_dir_is_the_tightest_ancestor():
    facts = collect_cpus(root=os.path.join(FIXTURES, "v1_quota"), affinity="0-15")
    assert facts["quota_dir"].endswith("cpu,cpuacct/docker/abc")


def test_collect_cpus_broken_tree_reports_errors():
    facts = collect_cpus(root=os.path.join(FIXTURES, "broken"), affinity=[0])
    assert facts["online"] is None and facts["usable"] == 1
    assert any("online" in error for error in facts["errors"])
    assert any("mountinfo" in error for error in facts["errors"])


def test_collect_cpus_this_host():
    facts = collect_cpus()
    assert facts["usable"] == min(len(os.sched_getaffinity(0)), facts["online"])
