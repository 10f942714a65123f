# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``/proc/<pid>/mountinfo`` parsed once, for disks (which filesystem holds a path) and cgroupfs
(where each cgroup hierarchy is mounted)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def unescape_mount_field(text):
    r"""mountinfo escapes space, tab, newline and backslash as octal: ``/mnt/my\040disk`` -> ``/mnt/my disk``."""
    return _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), text)


def parse_mountinfo(text):
    """mountinfo text -> ``[{root, mount_point, options, fstype, source, super_options}]`` in file order.

    ``root`` is the sub-tree of the filesystem mounted there (``/docker/abc`` for a bind mount of a
    cgroup sub-tree); ``options`` is the per-mount option string (``ro,relatime``); ``super_options``
    the filesystem's list (``['rw', 'memory']`` names a v1 cgroup's controllers). The optional
    fields before `` - `` vary in number and are skipped; malformed lines are ignored.
    """
    mounts = []
    for line in (text or "").splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        before = left.split()
        after = right.split()
        if len(before) < 5 or not after:
            continue
        mounts.append({
            "root": unescape_mount_field(before[3]),
            "mount_point": unescape_mount_field(before[4]),
            "options": before[5] if len(before) > 5 else "",
            "fstype": after[0],
            "source": unescape_mount_field(after[1]) if len(after) > 1 else None,
            "super_options": after[2].split(",") if len(after) > 2 else [],
        })
    return mounts
