# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_mountinfo: the one /proc/<pid>/mountinfo parser."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._mountinfo import parse_mountinfo, unescape_mount_field

MOUNTINFO = u"""\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
61 60 0:51 / /scratch/build\\040dir rw,relatime - tmpfs tmpfs rw,size=1g
35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid master:15 shared:3 - cgroup cgroup rw,memory
garbage line
1 2 3 4 - x
"""


@pytest.mark.parametrize("text, expected", [
    ("/mnt/my\\040disk", "/mnt/my disk"),
    ("/a\\011b\\012c\\134d", "/a\tb\nc\\d"),
    ("/plain", "/plain"),
    ("/not\\08octal", "/not\\08octal"),
])
def test_unescape_mount_field(text, expected):
    assert unescape_mount_field(text) == expected


def test_parse_mountinfo_fields_in_file_order():
    assert parse_mountinfo(MOUNTINFO) == [
        {"root": "/", "mount_point": "/", "options": "rw,relatime", "fstype": "ext4", "source": "/dev/vda",
         "super_options": ["rw", "discard"]},
        {"root": "/", "mount_point": "/scratch/build dir", "options": "rw,relatime", "fstype": "tmpfs", "source": "tmpfs",
         "super_options": ["rw", "size=1g"]},
        # optional fields (master:15 shared:3) are skipped, whatever their number
        {"root": "/docker/abc", "mount_point": "/sys/fs/cgroup/memory", "options": "ro,nosuid", "fstype": "cgroup",
         "source": "cgroup", "super_options": ["rw", "memory"]},
    ]


@pytest.mark.parametrize("text", ["", None, "no separator at all\n"])
def test_parse_mountinfo_empty_or_malformed(text):
    assert parse_mountinfo(text) == []
