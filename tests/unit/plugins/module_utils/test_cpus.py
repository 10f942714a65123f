# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._cpus import (
    collect_cpus,
    cpus_facts,
    parse_cfs_quota,
    parse_cpu_max,
    quota_to_cpus,
    usable_cpus,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "cpus")


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


@pytest.mark.parametrize("quota, whole", [(None, None), (0.5, 1), (1.0, 1), (2.999, 2), (3.0, 3)])
def test_quota_to_cpus(quota, whole):
    assert quota_to_cpus(quota) == whole


def test_cpus_facts_shape():
    assert cpus_facts(8, 4, 2.5, "/sys/fs/cgroup/cpu/x", ["e"]) == {
        "online": 8, "affinity": 4, "quota_cpus": 2.5, "quota_dir": "/sys/fs/cgroup/cpu/x", "usable": 2, "errors": ["e"]}


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
