# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet_memory: parsers on text and collect_memory on fixture trees (this live host: tests/host/test_memory_host.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._memory import (
    collect_memory,
    effective_view,
    free_view,
    inactive_file_from_stat,
    limit_path,
    parse_flat_keyed,
    parse_meminfo,
    parse_oom_kill_count,
    parse_pressure,
    parse_v1_limit,
    parse_v2_limit,
    sees_kernel_threads,
    working_set,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "memory")
KiB = 1024
MiB = 1024 ** 2
GiB = 1024 ** 3
V1_MEMORY = "/sys/fs/cgroup/memory"


def fixture(case):
    return os.path.join(FIXTURES, case)


def dig(facts, dotted):
    value = facts
    for key in dotted.split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


# --------------------------------------------------------------------------------------------
# the seed: `free -h` printed  Mem: 449Gi 441Mi 448Gi 140Ki 235Mi 448Gi / Swap: 0B 0B 0B
# --------------------------------------------------------------------------------------------

SEED_FREE_H = [
    ("total_human", "449Gi"),
    ("used_human", "441Mi"),
    ("free_human", "448Gi"),
    ("shared_human", "140Ki"),
    ("buff_cache_human", "235Mi"),
    ("available_human", "448Gi"),
    ("swap_total_human", "0B"),
    ("swap_used_human", "0B"),
    ("swap_free_human", "0B"),
]


@pytest.mark.parametrize("field, expected", SEED_FREE_H)
def test_seed_host_view_prints_what_free_h_printed(field, expected):
    with open(os.path.join(fixture("seed_449g"), "proc", "meminfo")) as handle:
        host = free_view(parse_meminfo(handle.read()))
    assert host[field] == expected


def test_free_view_bytes_follow_procps_ng_4():
    meminfo = parse_meminfo(
        "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 600 kB\nBuffers: 10 kB\nCached: 200 kB\n"
        "SReclaimable: 30 kB\nShmem: 5 kB\nSwapTotal: 50 kB\nSwapFree: 20 kB\nHugePages_Total: 4\n"
    )
    assert meminfo["HugePages_Total"] == 4  # a count, not kB
    host = free_view(meminfo)
    assert host["total_bytes"] == 1000 * KiB
    assert host["used_bytes"] == 400 * KiB  # total - available, not total - free - buff/cache (690)
    assert host["buff_cache_bytes"] == 240 * KiB  # Buffers + Cached + SReclaimable
    assert host["shared_bytes"] == 5 * KiB
    assert (host["swap_total_bytes"], host["swap_used_bytes"], host["swap_free_bytes"]) == (50 * KiB, 30 * KiB, 20 * KiB)
    assert host["available_estimated"] is False


def test_free_view_estimates_available_without_memavailable():
    host = free_view(parse_meminfo("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 10 kB\nCached: 200 kB\nSReclaimable: 30 kB\n"))
    assert host["available_estimated"] is True
    assert host["available_bytes"] == 340 * KiB  # free + buff/cache
    assert host["used_bytes"] == 660 * KiB


# --------------------------------------------------------------------------------------------
# parsers
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("parser, text, expected", [
    (parse_v1_limit, "9223372036854771712\n", None),
    (parse_v1_limit, "9223372036854710272\n", None),  # 64 KiB pages write a different "no limit"
    (parse_v1_limit, "2147483648\n", 2 * GiB),
    (parse_v2_limit, "max\n", None),
    (parse_v2_limit, "268435456\n", 256 * MiB),
])
def test_limits(parser, text, expected):
    assert parser(text) == expected


def test_parse_pressure():
    assert parse_pressure("some avg10=1.50 avg60=0.80 avg300=0.20 total=123456\nfull avg10=0.50 avg60=0.10 avg300=0.05 total=65432\n") == {
        "present": True,
        "some": {"avg10": 1.5, "avg60": 0.8, "avg300": 0.2, "total": 123456},
        "full": {"avg10": 0.5, "avg60": 0.1, "avg300": 0.05, "total": 65432},
    }


# --------------------------------------------------------------------------------------------
# collect_memory on fixture trees
# --------------------------------------------------------------------------------------------

UNLIMITED_CGROUP = {"cgroup.limit_bytes": None, "cgroup.limit_dir": None, "cgroup.limit_path": None,
                    "cgroup.available_bytes": None}

CASES = [
    ("seed_449g", dict(UNLIMITED_CGROUP, **{
        "cgroup.version": 1, "cgroup.path": "/docker/2f1c", "cgroup.dir": V1_MEMORY + "/docker/2f1c",
        "cgroup.usage_human": "441Mi", "cgroup.oom_kill": 1,
        "effective.limited_by": "host", "effective.total_human": "449Gi", "effective.available_human": "448Gi",
        "oom_kills.host": 1, "oom_kills.cgroup": 1, "numa.nodes": [0, 1], "numa.count": 2, "errors": [],
    })),
    ("v1_limited", {
        "cgroup.version": 1, "cgroup.dir": V1_MEMORY + "/build", "cgroup.limit_bytes": 2 * GiB,
        "cgroup.limit_human": "2.0Gi", "cgroup.limit_dir": V1_MEMORY + "/build",
        "cgroup.usage_bytes": 1536 * MiB, "cgroup.inactive_file_bytes": 512 * MiB,  # total_inactive_file wins
        "cgroup.working_set_bytes": GiB, "cgroup.available_bytes": GiB, "cgroup.oom_kill": 3, "cgroup.oom": None,
        "effective.total_bytes": 2 * GiB, "effective.available_bytes": GiB, "effective.limited_by": "cgroup",
        "oom_kills.host": 7, "oom_kills.cgroup": 3,
        "pressure.present": True, "pressure.some.avg10": 1.5, "pressure.full.total": 65432, "errors": [],
    }),
    ("v1_unlimited", dict(UNLIMITED_CGROUP, **{
        "cgroup.version": 1, "cgroup.working_set_bytes": 384 * MiB,
        "effective.total_bytes": 16 * GiB, "effective.available_bytes": 12 * GiB, "effective.limited_by": "host",
    })),
    ("v1_nested_ancestor", {
        "cgroup.dir": V1_MEMORY + "/a/b/c", "cgroup.limit_bytes": 4 * GiB, "cgroup.limit_dir": V1_MEMORY + "/a/b",
        "cgroup.limit_path": "/a/b", "cgroup.usage_bytes": GiB,
        "cgroup.available_bytes": GiB,  # b: 4 GiB - 3 GiB used by b and its other children
        "effective.total_bytes": 4 * GiB, "effective.available_bytes": GiB, "effective.limited_by": "cgroup",
    }),
    ("v1_mount_root_hierarchical", {
        "cgroup.path": "/docker/abc/build", "cgroup.dir": V1_MEMORY + "/build",
        "cgroup.limit_bytes": GiB, "cgroup.limit_dir": V1_MEMORY + "/build/memory.stat:hierarchical_memory_limit",
        "cgroup.available_bytes": 512 * MiB, "effective.total_bytes": GiB, "errors": [],
    }),
    ("v2_limited", {
        "cgroup.version": 2, "cgroup.path": "/job", "cgroup.dir": "/sys/fs/cgroup/job",
        "cgroup.limit_bytes": 2 * GiB, "cgroup.limit_dir": "/sys/fs/cgroup/job", "cgroup.inactive_file_bytes": 512 * MiB,
        "cgroup.working_set_bytes": GiB, "cgroup.available_bytes": GiB, "cgroup.high_bytes": None,
        "cgroup.oom": 2, "cgroup.oom_kill": 1, "oom_kills.cgroup": 1,
        "effective.total_human": "2.0Gi", "effective.available_human": "1.0Gi", "effective.limited_by": "cgroup",
        "numa.nodes": [0, 1, 3], "numa.count": 3, "errors": [],
    }),
    ("v2_max", dict(UNLIMITED_CGROUP, **{
        "cgroup.version": 2, "cgroup.high_bytes": GiB, "cgroup.high_human": "1.0Gi",
        "effective.total_bytes": 16 * GiB, "effective.limited_by": "host", "errors": [],
    })),
    ("v2_nested_ancestor", {
        "cgroup.version": 2, "cgroup.dir": "/sys/fs/cgroup/a/b/c", "cgroup.limit_bytes": GiB,
        "cgroup.limit_dir": "/sys/fs/cgroup/a/b", "cgroup.working_set_bytes": 300 * MiB,
        "cgroup.available_bytes": 224 * MiB,  # b: 1 GiB - (900 MiB - 100 MiB inactive_file)
        "effective.total_bytes": GiB, "effective.available_bytes": 224 * MiB, "errors": [],
    }),
    ("v2_root", dict(UNLIMITED_CGROUP, **{
        "cgroup.version": 2, "cgroup.path": "/", "cgroup.dir": "/sys/fs/cgroup", "cgroup.usage_bytes": None,
        "cgroup.inactive_file_bytes": 4096, "effective.limited_by": "host", "errors": [],
    })),
    # a privileged container's cgroup namespace: its mount root is a real cgroup, limited by its memory.max
    ("v2_namespace_root", {
        "cgroup.version": 2, "cgroup.path": "/", "cgroup.dir": "/sys/fs/cgroup", "cgroup.limit_bytes": 600 * MiB,
        "cgroup.limit_dir": "/sys/fs/cgroup", "cgroup.limit_path": "/", "cgroup.working_set_bytes": 150 * MiB,
        "cgroup.available_bytes": 450 * MiB, "cgroup.oom_kill": 1, "cgroup.oom": 1,
        "effective.total_bytes": 600 * MiB, "effective.available_bytes": 450 * MiB, "effective.limited_by": "cgroup",
        "errors": [],
    }),
    ("v2_without_memory_v1_memory", {
        "cgroup.version": 1, "cgroup.path": "/process_api/27dd", "cgroup.dir": V1_MEMORY + "/process_api/27dd",
        "cgroup.limit_bytes": 2 * GiB, "effective.total_bytes": 2 * GiB, "errors": [],
    }),
    ("v2_without_memory_only", dict(UNLIMITED_CGROUP, **{
        "cgroup.version": None, "cgroup.dir": None, "effective.limited_by": "host", "effective.total_bytes": 16 * GiB,
        "errors": ["/sys/fs/cgroup/cgroup.controllers: no memory controller in cgroup v2 at /sys/fs/cgroup and none in v1;"
                   " no cgroup limit known"],
    })),
    ("v1_missing_memory_stat", {
        "cgroup.limit_bytes": 2 * GiB, "cgroup.usage_bytes": 1536 * MiB, "cgroup.inactive_file_bytes": None,
        "cgroup.working_set_bytes": 1536 * MiB, "cgroup.available_bytes": 512 * MiB,
        "cgroup.errors": ["/sys/fs/cgroup/memory/build/memory.stat: No such file or directory;"
                          " inactive_file taken as 0 (working set = usage)"],
        "errors": ["/sys/fs/cgroup/memory/build/memory.stat: No such file or directory;"
                   " inactive_file taken as 0 (working set = usage)"],
        "effective.available_bytes": 512 * MiB,
    }),
    ("old_kernel", dict(UNLIMITED_CGROUP, **{
        "host.available_estimated": True, "host.available_human": "12Gi", "cgroup.version": None,
        "pressure": {"present": False, "reason": "/proc/pressure/memory: No such file or directory"},
        "oom_kills": {"host": None, "cgroup": None}, "numa": {"nodes": [], "count": None},
        "effective.limited_by": "host",
        "errors": [
            "/proc/meminfo: no MemAvailable (kernel < 3.14); available estimated as free + buff/cache",
            "/proc/self/cgroup: No such file or directory; no cgroup limit known",
            "/proc/self/mountinfo: No such file or directory; no cgroup limit known",
            "/proc/pressure/memory: No such file or directory; pressure.present false",
            "/proc/vmstat: no oom_kill line (kernel < 4.13); host oom_kills unknown",
            "/sys/devices/system/node/online: No such file or directory; NUMA count unknown",
        ],
    })),
    # captured on the build host: cgroup2 at /sys/fs/cgroup/unified (hugetlb only), v1 memory, no limit
    ("real_host_v1", dict(UNLIMITED_CGROUP, **{
        "cgroup.version": 1, "cgroup.path": "/process_api/27dda4a1140fed4326db85e497885514",
        "cgroup.dir": V1_MEMORY + "/process_api/27dda4a1140fed4326db85e497885514",
        "cgroup.usage_bytes": 11354112, "cgroup.inactive_file_bytes": 2306048, "cgroup.working_set_bytes": 9048064,
        "cgroup.oom_kill": 0, "host.total_bytes": 24684096 * KiB, "host.available_bytes": 24332844 * KiB,
        "host.total_human": "23Gi", "host.used_human": "343Mi", "host.shared_human": "8.6Mi", "host.buff_cache_human": "320Mi",
        "effective.total_bytes": 24684096 * KiB, "effective.limited_by": "host",
        "pressure.present": True, "oom_kills.host": 0, "numa.count": 1, "errors": [],
    })),
]


@pytest.mark.parametrize("case, expected", CASES, ids=[case for case, _expected in CASES])
def test_collect_memory_on_fixture_trees(case, expected):
    facts = collect_memory(root=fixture(case))
    assert sorted(facts) == ["cgroup", "effective", "errors", "host", "host_pid_namespace", "numa", "oom_kills", "pressure"]
    got = dict((key, dig(facts, key)) for key in expected)
    assert got == expected


@pytest.mark.parametrize("case", [case for case, _expected in CASES], ids=[case for case, _expected in CASES])
def test_effective_never_exceeds_either_side(case):
    facts = collect_memory(root=fixture(case))
    effective, host, cgroup = facts["effective"], facts["host"], facts["cgroup"]
    assert effective["total_bytes"] <= host["total_bytes"]
    assert effective["available_bytes"] <= min(host["available_bytes"], effective["total_bytes"])
    if cgroup["limit_bytes"] is not None:
        assert effective["total_bytes"] <= cgroup["limit_bytes"]
    if cgroup["available_bytes"] is not None:
        assert effective["available_bytes"] <= cgroup["available_bytes"]
    for section in (host, cgroup, effective):
        for key in section:
            if key.endswith("_bytes"):
                assert key[:-6] + "_human" in section


def test_missing_tree_is_facts_not_exception(tmp_path):
    facts = collect_memory(root=str(tmp_path))
    assert facts["host"]["total_bytes"] == 0
    assert facts["cgroup"]["version"] is None
    assert "/proc/meminfo: No such file or directory; host view empty (all 0)" in facts["errors"]


def test_unreadable_value_is_reported_by_name(tmp_path):
    tree = str(tmp_path / "tree")
    shutil.copytree(fixture("v1_missing_memory_stat"), tree)
    with open(os.path.join(tree, "sys/fs/cgroup/memory/build/memory.limit_in_bytes"), "w") as handle:
        handle.write("lots\n")
    facts = collect_memory(root=tree)
    assert facts["cgroup"]["limit_bytes"] is None
    assert facts["errors"][1:] == [
        "/sys/fs/cgroup/memory/build/memory.limit_in_bytes: unreadable value 'lots'"
        " (invalid literal for int() with base 10: 'lots'); this level taken as unlimited"]


@pytest.mark.parametrize("text, expected", [
    ("cache 10\ntotal_inactive_file 7\nbad line here\nx notanumber\n", {"cache": 10, "total_inactive_file": 7}),
    ("oom 2\noom_kill 1\n", {"oom": 2, "oom_kill": 1}),
    ("", {}),
])
def test_parse_flat_keyed(text, expected):
    assert parse_flat_keyed(text) == expected


@pytest.mark.parametrize("text, count", [
    ("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", 3),   # v1 memory.oom_control
    ("low 0\nhigh 0\nmax 4\noom 2\noom_kill 1\n", 1),      # v2 memory.events
    ("oom_kill_disable 0\nunder_oom 0\n", None),             # v1 before 4.13
    (None, None),
])
def test_parse_oom_kill_count(text, count):
    assert parse_oom_kill_count(text) == count


@pytest.mark.parametrize("stat, version, inactive", [
    ({"total_inactive_file": 5, "inactive_file": 3}, 1, 5),    # v1: hierarchical counter first
    ({"inactive_file": 3}, 1, 3),
    ({"total_inactive_file": 5, "inactive_file": 3}, 2, 3),    # v2 has no total_ counters
    ({}, 2, None),
])
def test_inactive_file_from_stat(stat, version, inactive):
    assert inactive_file_from_stat(stat, version) == inactive


@pytest.mark.parametrize("usage, inactive, expected", [
    (10, 4, 6), (10, None, 10), (4, 10, 0), (None, 4, None),
])
def test_working_set(usage, inactive, expected):
    assert working_set(usage, inactive) == expected


@pytest.mark.parametrize("host, cgroup, expected", [
    ((16 * GiB, 12 * GiB), {"limit_bytes": None, "available_bytes": None}, (16 * GiB, 12 * GiB, "host")),
    ((16 * GiB, 12 * GiB), {"limit_bytes": 2 * GiB, "available_bytes": GiB}, (2 * GiB, GiB, "cgroup")),
    ((16 * GiB, 12 * GiB), {"limit_bytes": 2 * GiB, "available_bytes": None}, (2 * GiB, 2 * GiB, "cgroup")),
    ((16 * GiB, GiB), {"limit_bytes": 2 * GiB, "available_bytes": 2 * GiB}, (2 * GiB, GiB, "host")),
])
def test_effective_view(host, cgroup, expected):
    view = effective_view({"total_bytes": host[0], "available_bytes": host[1]}, cgroup)
    assert (view["total_bytes"], view["available_bytes"], view["limited_by"]) == expected


@pytest.mark.parametrize("path, directory, limit_dir, expected", [
    ("/a/b/c", "/sys/fs/cgroup/a/b/c", "/sys/fs/cgroup/a/b/c", "/a/b/c"),
    ("/a/b/c", "/sys/fs/cgroup/a/b/c", "/sys/fs/cgroup/a/b", "/a/b"),
    ("/a/b/c", "/sys/fs/cgroup/a/b/c", "/sys/fs/cgroup", "/"),
    # a container that mounts only its own sub-tree: directory components map to the path's last ones
    ("/docker/abc/build", "/sys/fs/cgroup/memory/build", "/sys/fs/cgroup/memory", "/docker/abc"),
    ("/docker/abc/build", "/sys/fs/cgroup/memory/build",
     "/sys/fs/cgroup/memory/build/memory.stat:hierarchical_memory_limit", "/docker/abc/build"),
    ("/a", "/sys/fs/cgroup/a", None, None),
])
def test_limit_path_names_the_binding_level(path, directory, limit_dir, expected):
    assert limit_path(path, directory, limit_dir) == expected


@pytest.mark.parametrize("comm, expected", [("kthreadd\n", True), ("sh\n", False), (None, False)])
def test_sees_kernel_threads_only_in_the_host_pid_namespace(tmp_path, comm, expected):
    if comm is not None:
        (tmp_path / "proc" / "2").mkdir(parents=True)
        (tmp_path / "proc" / "2" / "comm").write_text(comm)
    assert sees_kernel_threads(str(tmp_path)) is expected
