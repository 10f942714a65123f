# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_cgroupfs: /proc/<pid>/cgroup, the cgroup mount, the directory, ancestors, tightest, id lists, locate_controller."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._cgroupfs import (
    ancestors,
    cgroup_dir,
    cgroup_dir_in_mount,
    locate_controller,
    parse_cgroup_mountinfo,
    parse_cgroup_mounts,
    parse_id_list,
    parse_proc_cgroup,
    parse_proc_cgroup_by_version,
    tightest,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
V1_MEMORY = "/sys/fs/cgroup/memory"


@pytest.mark.parametrize("text, expected", [
    ("4:memory:/process_api/27dd\n2:cpu,cpuacct:/\n9:name=systemd:/\n0::/\n",
     {"v1": {"memory": "/process_api/27dd", "cpu": "/", "cpuacct": "/", "name=systemd": "/"}, "v2": "/"}),
    ("0::/user.slice/user-0.slice/session-1.scope\n", {"v1": {}, "v2": "/user.slice/user-0.slice/session-1.scope"}),
    ("4:memory:/odd:name\n", {"v1": {"memory": "/odd:name"}, "v2": None}),
    ("", {"v1": {}, "v2": None}),
])
def test_parse_proc_cgroup_by_version(text, expected):
    assert parse_proc_cgroup_by_version(text) == expected


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


def test_parse_cgroup_mountinfo_keeps_what_lookup_needs():
    mounts = parse_cgroup_mountinfo(
        "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid master:15 shared:3 - cgroup cgroup rw,memory\n"
        "30 24 0:26 / /mnt/my\\040cgroup rw shared:5 - cgroup2 cgroup2 rw,nsdelegate\n"
        "garbage line\n")
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
def test_cgroup_dir_in_mount(mount_root, path, expected):
    assert cgroup_dir_in_mount({"root": mount_root, "mount_point": V1_MEMORY}, path) == expected


@pytest.mark.parametrize("mount, path, directory", [
    (("/", "/sys/fs/cgroup/memory"), "/process_api/x", "/sys/fs/cgroup/memory/process_api/x"),
    (("/", "/sys/fs/cgroup"), "/", "/sys/fs/cgroup"),
    (("/kubepods/pod1", "/sys/fs/cgroup/memory"), "/kubepods/pod1/c1", "/sys/fs/cgroup/memory/c1"),
])
def test_cgroup_dir(mount, path, directory):
    assert cgroup_dir(mount, path) == directory


@pytest.mark.parametrize("directory, mountpoint, chain", [
    ("/sys/fs/cgroup/memory/a/b", V1_MEMORY, ["/sys/fs/cgroup/memory/a/b", "/sys/fs/cgroup/memory/a", V1_MEMORY]),
    (V1_MEMORY, V1_MEMORY + "/", [V1_MEMORY]),
    ("/elsewhere/x", V1_MEMORY, ["/elsewhere/x"]),          # outside the hierarchy: itself only
    ("/sys/fs/cgroup/memoryx/a", V1_MEMORY, ["/sys/fs/cgroup/memoryx/a"]),
])
def test_ancestors(directory, mountpoint, chain):
    assert ancestors(directory, mountpoint) == chain


@pytest.mark.parametrize("text, ids", [
    ("0-3\n", [0, 1, 2, 3]),
    ("0-1,8,10-11", [0, 1, 8, 10, 11]),
    ("0-1,3\n", [0, 1, 3]),
    ("5", [5]),
    ("3,1,1-2", [1, 2, 3]),
    ("", []),
    ("\n", []),
])
def test_parse_id_list(text, ids):
    assert parse_id_list(text) == ids


@pytest.mark.parametrize("text", ["x", "1-", "-1", "3-1", "0-1,a", "1.5"])
def test_parse_id_list_rejects(text):
    with pytest.raises(ValueError):
        parse_id_list(text)


@pytest.mark.parametrize("levels, expected", [
    ([], (None, None)),
    ([("/a/b", None), ("/a", None)], (None, None)),
    ([("/a/b", 4), ("/a", 2), ("/", 8)], (2, "/a")),
    ([("/a/b", 2), ("/a", 2)], (2, "/a/b")),              # a tie names the innermost
    ([("/a/b", None), ("/a", 3)], (3, "/a")),             # an unlimited level is skipped
    ([("/a/b", 0), ("/a", 3)], (0, "/a/b")),              # 0 is a value, not "no limit"
    ([("/a/b", 2.5), ("/a", 6.0)], (2.5, "/a/b")),
])
def test_tightest(levels, expected):
    assert tightest(levels) == expected


# ---------------------------------------------------------------- locate_controller on trees

def _tree(root, files):
    for path, text in files.items():
        full = os.path.join(str(root), path.lstrip("/"))
        if not os.path.isdir(os.path.dirname(full)):
            os.makedirs(os.path.dirname(full))
        with open(full, "w") as handle:
            handle.write(text)
    return str(root)


TWO_V2_MOUNTS = {
    # a hybrid-looking node: the first cgroup2 mount has no memory controller, the second has
    "/proc/self/cgroup": "0::/job\n",
    "/proc/self/mountinfo": "30 24 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
                            "31 24 0:27 / /mnt/cg2 rw - cgroup2 cgroup2 rw\n",
    "/sys/fs/cgroup/unified/cgroup.controllers": "hugetlb\n",
    "/mnt/cg2/cgroup.controllers": "cpu io memory pids\n",
}

LOCATE = [
    ("memory", "memory/v1_limited", {"version": 1, "node_dir": V1_MEMORY + "/build", "node_mountpoint": V1_MEMORY,
                                     "errors": []}),
    ("memory", "memory/v2_limited", {"version": 2, "path": "/job", "node_dir": "/sys/fs/cgroup/job", "errors": []}),
    ("memory", "memory/v2_without_memory_v1_memory", {"version": 1, "node_dir": V1_MEMORY + "/process_api/27dd"}),
    ("memory", "memory/v2_without_memory_only", {
        "version": None, "dir": None,
        "errors": ["/sys/fs/cgroup/cgroup.controllers: no memory controller in cgroup v2 at /sys/fs/cgroup and none in v1"]}),
    ("memory", "memory/v1_mount_root_hierarchical", {"version": 1, "path": "/docker/abc/build", "node_dir": V1_MEMORY + "/build"}),
    ("memory", "memory/old_kernel", {"version": None, "errors": ["/proc/self/cgroup: No such file or directory",
                                                                 "/proc/self/mountinfo: No such file or directory"]}),
    ("cpu", "cpus/v1_quota", {"version": 1}),
    ("cpu", "cpus/v2_ns", {"version": 2}),
    ("memory", TWO_V2_MOUNTS, {"version": 2, "node_dir": "/mnt/cg2/job", "node_mountpoint": "/mnt/cg2", "errors": []}),
    ("cpu", TWO_V2_MOUNTS, {"version": 2, "node_dir": "/mnt/cg2/job"}),
    ("hugetlb", TWO_V2_MOUNTS, {"version": 2, "node_dir": "/sys/fs/cgroup/unified/job"}),
    ("pids", {"/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": "1 1 0:1 / / rw - ext4 /dev/vda rw\n"},
     {"version": None, "errors": ["/proc/self/cgroup, /proc/self/mountinfo: no pids cgroup mounted (v1 or v2)"]}),
]


@pytest.mark.parametrize("controller, tree, expected", LOCATE, ids=[str(i) for i in range(len(LOCATE))])
def test_locate_controller(tmp_path, controller, tree, expected):
    root = os.path.join(FIXTURES, tree) if isinstance(tree, str) else _tree(tmp_path, tree)
    where = locate_controller(controller, root=root)
    assert dict((key, where[key]) for key in expected) == expected
    if where["version"] is not None:
        assert where["dir"] == os.path.join(root, where["node_dir"].lstrip("/"))
        assert where["mountpoint"] == os.path.join(root, where["node_mountpoint"].lstrip("/"))
