# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""disks: mountinfo parsing, longest-prefix mount matching, and statvfs of real paths."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _disks

MOUNTINFO = u"""\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684096k
60 27 0:50 / /scratch rw,relatime - xfs /dev/nvme0n1 rw
61 60 0:51 / /scratch/build\\040dir rw,relatime - tmpfs tmpfs rw,size=1g
62 27 0:52 / /srv/ro ro,relatime - ext4 /dev/vdb ro
63 27 0:53 / /scratchpad rw,relatime - ext4 /dev/vdc rw
64 60 0:54 / /scratch rw,relatime - overlay overlay rw
"""


@pytest.mark.parametrize("path, point, fstype", [
    ("/", "/", "ext4"),
    ("/tmp/x", "/", "ext4"),
    ("/dev/shm", "/dev/shm", "tmpfs"),
    ("/scratch/build dir/sgl", "/scratch/build dir", "tmpfs"),
    ("/scratch/other", "/scratch", "overlay"),     # the later mount on the same point hides the first
    ("/scratchpad/x", "/scratchpad", "ext4"),       # a prefix of the string is not a parent directory
    ("/srv/ro/a", "/srv/ro", "ext4"),
])
def test_mount_for_longest_match(path, point, fstype):
    mount = _disks.mount_for(path, _disks.parse_mountinfo(MOUNTINFO))
    assert mount["mount_point"] == point and mount["fstype"] == fstype


def test_collect_real_paths(tmp_path):
    existing = tmp_path / "build"
    existing.mkdir()
    missing = str(existing / "not" / "yet")
    facts = _disks.collect_disks([str(existing), missing])
    assert facts["errors"] == []
    here, there = facts["paths"][str(existing)], facts["paths"][missing]
    assert here["exists"] is True and here["checked_path"] == str(existing)
    assert there["exists"] is False and there["checked_path"] == str(existing)
    stat = os.statvfs(str(existing))
    assert here["total_bytes"] == stat.f_blocks * stat.f_frsize
    assert abs(here["free_bytes"] - stat.f_bavail * stat.f_frsize) < 64 * 2 ** 20
    assert here["writable"] is True and here["mount_point"]
    assert here["fstype"] and here["free_human"].endswith(("B", "i"))


def test_unreadable_mountinfo_is_an_error_fact(tmp_path):
    (tmp_path / "data").mkdir()
    facts = _disks.collect_disks(["/data"], root=str(tmp_path))
    entry = facts["paths"]["/data"]
    assert entry["exists"] is True and entry["checked_path"] == "/data"
    assert entry["mount_point"] is None and entry["total_bytes"] > 0
    assert facts["errors"] and "mountinfo" in facts["errors"][0]


def test_fixture_root_maps_paths_and_mounts(tmp_path):
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "mountinfo").write_text(MOUNTINFO)
    (tmp_path / "scratch").mkdir()
    facts = _disks.collect_disks(["/scratch/build dir/sgl"], root=str(tmp_path))
    entry = facts["paths"]["/scratch/build dir/sgl"]
    assert entry["exists"] is False and entry["checked_path"] == "/scratch"
    assert entry["mount_point"] == "/scratch" and entry["fstype"] == "overlay"


def test_statvfs_without_inode_table_reports_unknown_inodes():
    class Stat(object):
        f_bavail, f_frsize, f_blocks, f_files, f_favail = 10, 4096, 20, 0, 0
    space = _disks.space_from_statvfs(Stat())
    assert space["free_bytes"] == 40960 and space["total_bytes"] == 81920
    assert space["free_inodes"] is None and space["total_inodes"] is None
