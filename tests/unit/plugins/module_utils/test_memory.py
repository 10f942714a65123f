# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet_memory: parsers on text, collect_memory on fixture trees, and on this live host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils import _memory
from ansible_collections.gpufleet.preflight.plugins.module_utils._cgroupfs import (
    ancestors,
    cgroup_dir_in_mount as cgroup_dir,
    parse_cgroup_mountinfo as parse_mountinfo,
    parse_proc_cgroup_by_version as parse_proc_cgroup,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._memory import (
    collect_memory,
    free_view,
    parse_meminfo,
    parse_node_list,
    parse_pressure,
    parse_v1_limit,
    parse_v2_limit,
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

@pytest.mark.parametrize("text, expected", [
    ("4:memory:/process_api/27dd\n2:cpu,cpuacct:/\n9:name=systemd:/\n0::/\n",
     {"v1": {"memory": "/process_api/27dd", "cpu": "/", "cpuacct": "/", "name=systemd": "/"}, "v2": "/"}),
    ("0::/user.slice/user-0.slice/session-1.scope\n", {"v1": {}, "v2": "/user.slice/user-0.slice/session-1.scope"}),
    ("4:memory:/odd:name\n", {"v1": {"memory": "/odd:name"}, "v2": None}),
    ("", {"v1": {}, "v2": None}),
])
def test_parse_proc_cgroup(text, expected):
    assert parse_proc_cgroup(text) == expected


def test_parse_mountinfo_skips_optional_fields_and_unescapes():
    mounts = parse_mountinfo(
        "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid master:15 shared:3 - cgroup cgroup rw,memory\n"
        "30 24 0:26 / /mnt/my\\040cgroup rw shared:5 - cgroup2 cgroup2 rw,nsdelegate\n"
        "garbage line\n"
    )
    assert mounts == [
        {"root": "/docker/abc", "mount_point": "/sys/fs/cgroup/memory", "fstype": "cgroup", "super_options": ["rw", "memory"]},
        {"root": "/", "mount_point": "/mnt/my cgroup", "fstype": "cgroup2", "super_options": ["rw", "nsdelegate"]},
    ]


@pytest.mark.parametrize("mount_root, path, expected", [
    ("/", "/a/b", ("/sys/fs/cgroup/memory/a/b", None)),
    ("/", "/", ("/sys/fs/cgroup/memory", None)),
    ("/docker/abc", "/docker/abc/build", ("/sys/fs/cgroup/memory/build", None)),
    ("/docker/abc", "/docker/abc", ("/sys/fs/cgroup/memory", None)),
    ("/docker/abc", "/docker/abcdef", ("/sys/fs/cgroup/memory",
                                       "cgroup path /docker/abcdef is outside the mount root /docker/abc; using the mount point")),
])
def test_cgroup_dir_handles_mount_root(mount_root, path, expected):
    assert cgroup_dir({"root": mount_root, "mount_point": V1_MEMORY}, path) == expected


def test_ancestors_stop_at_the_mount_point():
    assert ancestors("/sys/fs/cgroup/memory/a/b", V1_MEMORY) == [
        "/sys/fs/cgroup/memory/a/b", "/sys/fs/cgroup/memory/a", "/sys/fs/cgroup/memory"]
    assert ancestors(V1_MEMORY, V1_MEMORY + "/") == [V1_MEMORY]


@pytest.mark.parametrize("parser, text, expected", [
    (parse_v1_limit, "9223372036854771712\n", None),
    (parse_v1_limit, "9223372036854710272\n", None),  # 64 KiB pages write a different "no limit"
    (parse_v1_limit, "2147483648\n", 2 * GiB),
    (parse_v2_limit, "max\n", None),
    (parse_v2_limit, "268435456\n", 256 * MiB),
])
def test_limits(parser, text, expected):
    assert parser(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("0-1,3\n", [0, 1, 3]),
    ("0\n", [0]),
    ("\n", []),
])
def test_parse_node_list(text, expected):
    assert parse_node_list(text) == expected


def test_parse_pressure():
    assert parse_pressure("some avg10=1.50 avg60=0.80 avg300=0.20 total=123456\nfull avg10=0.50 avg60=0.10 avg300=0.05 total=65432\n") == {
        "present": True,
        "some": {"avg10": 1.5, "avg60": 0.8, "avg300": 0.2, "total": 123456},
        "full": {"avg10": 0.5, "avg60": 0.1, "avg300": 0.05, "total": 65432},
    }


# --------------------------------------------------------------------------------------------
# collect_memory on fixture trees
# --------------------------------------------------------------------------------------------

UNLIMITED_CGROUP = {"cgroup.limit_bytes": None, "cgroup.limit_dir": None, "cgroup.available_bytes": None}

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
        "cgroup.usage_bytes": GiB,
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
            "/proc/self/cgroup: No such file or directory; cgroup view skipped",
            "/proc/self/mountinfo: No such file or directory; cgroup view skipped",
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
    assert sorted(facts) == ["cgroup", "effective", "errors", "host", "numa", "oom_kills", "pressure"]
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


# --------------------------------------------------------------------------------------------
# the fixtures against the real `free -h` of this host (procps-ng), via a private mount namespace
# --------------------------------------------------------------------------------------------

def _real_free_h(meminfo_path):
    script = "mount --bind %s /proc/meminfo && exec free -h" % meminfo_path
    out = subprocess.check_output(["unshare", "--mount", "sh", "-c", script], universal_newlines=True)
    lines = dict((line.split()[0], line.split()[1:]) for line in out.splitlines()[1:])
    return dict(zip(("total", "used", "free", "shared", "buff_cache", "available"), lines["Mem:"]),
                **dict(zip(("swap_total", "swap_used", "swap_free"), lines["Swap:"])))


REAL_FREE = [case for case, _expected in CASES if case != "old_kernel"]  # procps' no-MemAvailable guess differs on purpose


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("free"),
                    reason="needs root, unshare and procps free")
@pytest.mark.parametrize("case", REAL_FREE)
def test_human_strings_equal_real_free_h(case):
    meminfo_path = os.path.join(fixture(case), "proc", "meminfo")
    expected = _real_free_h(meminfo_path)
    with open(meminfo_path) as handle:
        host = free_view(parse_meminfo(handle.read()))
    assert dict((name, host[name + "_human"]) for name in expected) == expected


# --------------------------------------------------------------------------------------------
# this live host (cgroup v1 memory controller)
# --------------------------------------------------------------------------------------------

def _own_v1_memory_path():
    with open("/proc/self/cgroup") as handle:
        return parse_proc_cgroup(handle.read())["v1"].get("memory")


LIVE_V1 = pytest.mark.skipif(
    not os.path.isdir(V1_MEMORY) or not os.path.exists("/proc/self/cgroup") or _own_v1_memory_path() is None,
    reason="needs the cgroup v1 memory controller at /sys/fs/cgroup/memory")


@LIVE_V1
def test_live_host_matches_direct_reads():
    path = _own_v1_memory_path()
    directory = (V1_MEMORY + path).rstrip("/")
    facts = collect_memory()
    with open(directory + "/memory.usage_in_bytes") as handle:
        usage = int(handle.read())
    assert facts["cgroup"]["version"] == 1
    assert facts["cgroup"]["path"] == path
    assert facts["cgroup"]["dir"] == directory
    assert abs(facts["cgroup"]["usage_bytes"] - usage) <= 64 * MiB
    assert facts["effective"]["total_bytes"] <= facts["host"]["total_bytes"]
    assert facts["errors"] == []


CHILD = """
import json, sys
sys.stdin.readline()  # wait until the parent has moved us into the test cgroup
from ansible_collections.gpufleet.preflight.plugins.module_utils._memory import collect_memory
print(json.dumps(collect_memory()))
"""


@LIVE_V1
@pytest.mark.skipif(os.geteuid() != 0, reason="creating a memory cgroup needs root")
def test_child_in_256mib_cgroup_sees_256mib():
    collections_root = os.path.abspath(os.path.join(os.path.dirname(_memory.__file__), *([os.pardir] * 5)))
    child_dir = (V1_MEMORY + _own_v1_memory_path()).rstrip("/") + "/gpufleet-test-memory-%d" % os.getpid()
    os.mkdir(child_dir)
    try:
        with open(child_dir + "/memory.limit_in_bytes", "w") as handle:
            handle.write(str(256 * MiB))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([collections_root] + sys.path))
        child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 env=env, universal_newlines=True)
        try:
            with open(child_dir + "/cgroup.procs", "w") as handle:
                handle.write(str(child.pid))
            out, _err = child.communicate("go\n", timeout=120)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert child.returncode == 0
        facts = json.loads(out)
        assert facts["cgroup"]["dir"] == child_dir
        assert facts["cgroup"]["limit_bytes"] == 256 * MiB
        assert facts["cgroup"]["limit_dir"] == child_dir
        assert 0 < facts["cgroup"]["usage_bytes"] < 256 * MiB
        assert facts["effective"]["total_bytes"] == 256 * MiB
        assert facts["effective"]["total_human"] == "256Mi"
        assert facts["effective"]["limited_by"] == "cgroup"
        assert facts["effective"]["available_bytes"] == facts["cgroup"]["available_bytes"] < 256 * MiB
    finally:
        os.rmdir(child_dir)
