# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Free space and inodes of the paths a build writes to -> ``gpufleet_disks``.

A build directory that does not exist yet is measured at its nearest existing ancestor: that is the
filesystem it will be created on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._mountinfo import parse_mountinfo
from ansible_collections.gpufleet.preflight.plugins.module_utils._paths import is_within


def mount_for(path, mounts):
    """The mount holding ``path``: the longest mount point that is ``path`` or a parent of it (last one wins on ties,
    as a later mount hides an earlier one on the same point)."""
    best = None
    for mount in mounts:
        point = mount["mount_point"]
        if is_within(path, point):
            if best is None or len(point) >= len(best["mount_point"]):
                best = mount
    return best


def nearest_existing(path, exists=os.path.exists):
    """``path`` itself when it exists, else its closest existing ancestor (``/`` at worst)."""
    current = os.path.normpath(path)
    while not exists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def logical_path(path_on_disk, root="/"):
    """A path under a fixture ``root`` as the node would name it: ``<root>/var/tmp`` -> ``/var/tmp``."""
    if root in ("/", ""):
        return os.path.normpath(path_on_disk)
    relative = os.path.relpath(path_on_disk, root)
    return "/" if relative == "." else "/" + relative


def space_from_statvfs(stat):
    """``os.statvfs`` result -> bytes and inodes available to an unprivileged build (``f_bavail``, ``f_favail``)."""
    free = stat.f_bavail * stat.f_frsize
    total = stat.f_blocks * stat.f_frsize
    # Filesystems without a fixed inode table (btrfs, some overlay/FUSE) report 0 inodes: unknown, not full.
    has_inodes = stat.f_files > 0
    return {
        "free_bytes": free,
        "free_human": human(free),
        "total_bytes": total,
        "total_human": human(total),
        "free_inodes": stat.f_favail if has_inodes else None,
        "total_inodes": stat.f_files if has_inodes else None,
    }


# ---- I/O below: statvfs and /proc/self/mountinfo ----------------------------------------------------------


def read_mounts(root="/"):
    """Mounts from ``<root>/proc/self/mountinfo``; ``(mounts, error)``."""
    path = os.path.join(root, "proc/self/mountinfo")
    try:
        with open(path) as handle:
            return parse_mountinfo(handle.read()), None
    except (IOError, OSError) as exc:
        return [], "%s: %s" % (path, exc.strerror or exc)


def measure_path(path, mounts, root="/"):
    """One path's entry of ``gpufleet_disks.paths``."""
    logical = os.path.normpath(os.path.join("/", os.path.expanduser(path)))
    on_disk = os.path.join(root, logical.lstrip("/")) if root not in ("/", "") else logical
    checked = nearest_existing(on_disk)
    entry = {
        "exists": os.path.exists(on_disk),
        "checked_path": logical_path(checked, root),
        "free_bytes": None, "free_human": None, "total_bytes": None, "total_human": None,
        "free_inodes": None, "total_inodes": None,
        "fstype": None, "mount_point": None, "read_only": None, "writable": None, "error": None,
    }
    try:
        entry.update(space_from_statvfs(os.statvfs(checked)))
    except OSError as exc:
        entry["error"] = "%s: %s" % (checked, exc.strerror or exc)
    # Symlinks (e.g. /tmp -> /scratch/tmp) are matched against mounts where they really lead.
    mount = mount_for(logical_path(os.path.realpath(checked), root), mounts)
    if mount:
        entry["fstype"] = mount["fstype"]
        entry["mount_point"] = mount["mount_point"]
        entry["read_only"] = mount["options"].split(",")[0] == "ro"
    entry["writable"] = os.access(checked, os.W_OK)
    return entry


def collect_disks(paths, root="/"):
    """``gpufleet_disks``: ``{paths: {path: {exists, checked_path, free/total bytes and inodes, fstype, mount_point,
    writable}}, errors: [...]}``; the caller chooses the paths (build, cache, temp)."""
    mounts, error = read_mounts(root)
    facts = {"paths": {}, "errors": [error] if error else []}
    for path in paths:
        facts["paths"][path] = measure_path(path, mounts, root)
    return facts
