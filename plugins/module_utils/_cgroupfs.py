# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a process's cgroup lives in cgroupfs (v1 per controller, v2 unified), without systemd."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


def parse_proc_cgroup(text):
    """``/proc/<pid>/cgroup`` -> ``{controller: path}``; the v2 line (``0::/x``) is keyed ``""``.

    A v1 line naming several controllers (``4:cpu,cpuacct:/x``) yields one key per controller.
    """
    paths = {}
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        controllers = parts[1]
        if controllers == "":
            paths[""] = parts[2]
            continue
        for name in controllers.split(","):
            paths[name] = parts[2]
    return paths


def _unescape_mount_field(field):
    # mountinfo escapes space, tab, newline and backslash as \ooo octal
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def parse_cgroup_mounts(mountinfo_text):
    """``/proc/self/mountinfo`` -> ``{'v1': {controller: (root, mountpoint)}, 'v2': [(root, mountpoint), ...]}``."""
    mounts = {"v1": {}, "v2": []}
    for line in mountinfo_text.splitlines():
        if " - " not in line:
            continue
        head, tail = line.split(" - ", 1)
        head_fields = head.split()
        tail_fields = tail.split()
        if len(head_fields) < 5 or len(tail_fields) < 3:
            continue
        root = _unescape_mount_field(head_fields[3])
        mountpoint = _unescape_mount_field(head_fields[4])
        fstype = tail_fields[0]
        if fstype == "cgroup2":
            mounts["v2"].append((root, mountpoint))
        elif fstype == "cgroup":
            for option in tail_fields[2].split(","):
                if option in ("rw", "ro") or "=" in option:
                    continue
                mounts["v1"].setdefault(option, (root, mountpoint))
    return mounts


def cgroup_dir(mount, path):
    """The directory of cgroup ``path`` under ``mount`` = (mount root, mount point).

    Inside a cgroup namespace the mount root is ``/`` and the path is relative to it already;
    a bind mount of a sub-tree has a root like ``/kubepods/x`` that the path starts with.
    """
    root, mountpoint = mount
    rel = path
    if root not in ("/", "") and (path == root or path.startswith(root.rstrip("/") + "/")):
        rel = path[len(root.rstrip("/")):]
    return os.path.normpath(mountpoint + "/" + rel.lstrip("/"))


def ancestors(directory, mountpoint):
    """``directory`` and each parent up to and including ``mountpoint``, innermost first."""
    found = []
    current = os.path.normpath(directory)
    top = os.path.normpath(mountpoint)
    while True:
        found.append(current)
        if current == top or len(current) <= len(top):
            break
        current = os.path.dirname(current)
    return found


def read_text(path):
    """The file's text, or ``None`` plus the reason: ``(text, error)``."""
    try:
        with open(path) as handle:
            return handle.read(), None
    except (IOError, OSError) as exc:
        return None, "%s: %s" % (path, exc.strerror or exc)


def locate_controller(controller, root="/", pid="self"):
    """Find ``pid``'s cgroup directory for ``controller`` (``memory``, ``cpu``).

    Returns ``{'version': 1|2|None, 'path': cgroup path, 'dir': directory, 'mountpoint': ..., 'errors': [...]}``.
    v1 wins when the controller is mounted as v1 (a hybrid host like this one mounts cgroup2
    without the memory controller); v2 is used when its root lists the controller.
    """
    result = {"version": None, "path": None, "dir": None, "mountpoint": None, "errors": []}
    proc = os.path.join(root, "proc", str(pid))
    cgroup_text, error = read_text(os.path.join(proc, "cgroup"))
    if error:
        result["errors"].append(error)
        return result
    mountinfo_text, error = read_text(os.path.join(proc, "mountinfo"))
    if error:
        result["errors"].append(error)
        return result
    paths = parse_proc_cgroup(cgroup_text)
    mounts = parse_cgroup_mounts(mountinfo_text)
    if controller in paths and controller in mounts["v1"]:
        mount = mounts["v1"][controller]
        mountpoint = os.path.join(root, mount[1].lstrip("/"))
        result.update(version=1, path=paths[controller], mountpoint=mountpoint,
                      dir=cgroup_dir((mount[0], mountpoint), paths[controller]))
        return result
    if "" in paths:
        for mount in mounts["v2"]:
            mountpoint = os.path.join(root, mount[1].lstrip("/"))
            text, dummy = read_text(os.path.join(mountpoint, "cgroup.controllers"))
            if text is not None and controller in text.split():
                result.update(version=2, path=paths[""], mountpoint=mountpoint,
                              dir=cgroup_dir((mount[0], mountpoint), paths[""]))
                return result
    result["errors"].append("no %s cgroup controller mounted (v1 or v2)" % controller)
    return result
