# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a process's cgroup lives in cgroupfs (v1 per controller, v2 unified), without systemd.

The one home for ``/proc/<pid>/cgroup`` parsing, choosing the cgroup mount, the cgroup's directory
under it and the walk up its ancestors; memory, cpus and guarded_build all build on these.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.preflight.plugins.module_utils._mountinfo import is_under, parse_mountinfo

_CGROUP_MOUNT_FIELDS = ("root", "mount_point", "fstype", "super_options")


# ---------------------------------------------------------------- /proc/<pid>/cgroup

def parse_proc_cgroup(text):
    """``/proc/<pid>/cgroup`` -> ``{controller: path}``; the v2 line (``0::/x``) is keyed ``""``.

    A v1 line naming several controllers (``4:cpu,cpuacct:/x``) yields one key per controller; named
    hierarchies stay as ``name=systemd``. Only hierarchy 0 with no controllers is v2.
    """
    paths = {}
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy_id, controllers, path = parts
        if hierarchy_id == "0" and controllers == "":
            paths[""] = path
            continue
        for name in controllers.split(","):
            if name:
                paths[name] = path
    return paths


def parse_proc_cgroup_by_version(text):
    """``/proc/<pid>/cgroup`` -> ``{"v1": {controller: path}, "v2": path or None}``, for callers that ask per version."""
    v1 = parse_proc_cgroup(text)
    v2 = v1.pop("", None)
    return {"v1": v1, "v2": v2}


# ---------------------------------------------------------------- cgroup mounts (from mountinfo)

def parse_cgroup_mountinfo(text):
    """mountinfo -> ``[{root, mount_point, fstype, super_options}]``, every mount: the fields cgroup lookup needs."""
    return [dict((key, mount[key]) for key in _CGROUP_MOUNT_FIELDS) for mount in parse_mountinfo(text)]


def v1_controllers(mount):
    """Controllers a v1 ``cgroup`` mount carries: its super options less ``rw``/``ro`` and ``key=value`` ones."""
    if mount["fstype"] != "cgroup":
        return []
    return [option for option in mount["super_options"] if option not in ("rw", "ro") and "=" not in option]


def parse_cgroup_mounts(mountinfo_text):
    """``/proc/self/mountinfo`` -> ``{'v1': {controller: (root, mountpoint)}, 'v2': [(root, mountpoint), ...]}``.

    A summary: the first v1 mount per controller; lookups use :func:`find_v1_mount`, which prefers a bind mount
    holding the process's cgroup.
    """
    mounts = {"v1": {}, "v2": []}
    for mount in parse_mountinfo(mountinfo_text):
        pair = (mount["root"], mount["mount_point"])
        if mount["fstype"] == "cgroup2":
            mounts["v2"].append(pair)
        for controller in v1_controllers(mount):
            mounts["v1"].setdefault(controller, pair)
    return mounts


def _by_preference(candidates, cgroup_path):
    """Mounts whose root holds ``cgroup_path`` first, deepest root first (bind mounts of sub-trees), then the rest."""
    if cgroup_path is None:
        return list(candidates)
    inside = [mount for mount in candidates if is_under(cgroup_path, mount["root"])]
    inside.sort(key=lambda mount: len(mount["root"]), reverse=True)  # stable: file order among equals
    return inside + [mount for mount in candidates if mount not in inside]


def _first(mounts):
    return mounts[0] if mounts else None


def find_v1_mount(mounts, controller, cgroup_path=None):
    """The v1 hierarchy carrying ``controller`` (``memory``, ``cpu``), or None."""
    return _first(_by_preference([m for m in mounts if controller in v1_controllers(m)], cgroup_path))


def cgroup2_mounts(mounts, cgroup_path=None):
    """The cgroup2 (unified) mounts, best first; whether one has a controller is in its ``cgroup.controllers``."""
    return _by_preference([m for m in mounts if m["fstype"] == "cgroup2"], cgroup_path)


def find_cgroup2_mount(mounts, cgroup_path=None):
    """The best cgroup2 mount, or None."""
    return _first(cgroup2_mounts(mounts, cgroup_path))


def has_controller(controllers_text, controller):
    """``cgroup.controllers`` text (``cpu io memory pids``) -> whether ``controller`` is bound to v2 there."""
    return controller in controllers_text.split()


# ---------------------------------------------------------------- directories

def cgroup_dir_in_mount(mount, cgroup_path):
    """``(directory, note)`` of ``cgroup_path`` under ``mount`` (``{root, mount_point}``).

    Inside a cgroup namespace the mount root is ``/`` and the path is relative to it already; a container
    that mounts only its own sub-tree shows root ``/docker/abc`` and path ``/docker/abc/build``, whose files
    are at ``<mount point>/build``. ``note`` is set when the path is outside the mount root and the mount
    point itself is used.
    """
    root = mount["root"].rstrip("/") or "/"
    mount_point = mount["mount_point"].rstrip("/") or "/"
    path = cgroup_path or "/"
    if root == "/":
        relative = path
    elif is_under(path, root):
        relative = path[len(root):]
    else:
        return mount_point, "cgroup path %s is outside the mount root %s; using the mount point" % (path, root)
    relative = relative.strip("/")
    return (mount_point + "/" + relative if relative else mount_point), None


def cgroup_dir(mount, path):
    """:func:`cgroup_dir_in_mount` for a ``(mount root, mount point)`` pair, without the note."""
    return cgroup_dir_in_mount({"root": mount[0], "mount_point": mount[1]}, path)[0]


def ancestors(directory, mountpoint):
    """``directory`` and each parent up to and including ``mountpoint``, innermost first.

    A directory outside ``mountpoint`` yields itself only: nothing above a hierarchy root is a cgroup.
    """
    top = os.path.normpath(mountpoint)
    current = os.path.normpath(directory)
    chain = [current]
    while current != top and is_under(current, top):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
        chain.append(current)
    return chain


# ---------------------------------------------------------------- I/O

def read_text(path, name=None):
    """The file's text, or ``None`` plus the reason: ``(text, error)``; the error names ``name`` or ``path``."""
    try:
        with open(path) as handle:
            return handle.read(), None
    except (IOError, OSError) as exc:
        return None, "%s: %s" % (name or path, exc.strerror or exc)


def locate_controller(controller, root="/", pid="self"):
    """Find ``pid``'s cgroup directory for ``controller`` (``memory``, ``cpu``).

    Returns ``{'version': 1|2|None, 'path': cgroup path, 'dir': directory, 'mountpoint': ..., 'errors': [...]}``,
    directories under ``root``. v1 wins when the controller is mounted as v1 (a hybrid host like this one
    mounts cgroup2 without the memory controller); v2 is used when its root lists the controller.
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
    mounts = parse_cgroup_mountinfo(mountinfo_text)

    def found(version, path, mount):
        mountpoint = os.path.join(root, mount["mount_point"].lstrip("/"))
        directory = cgroup_dir_in_mount({"root": mount["root"], "mount_point": mountpoint}, path)[0]
        result.update(version=version, path=path, mountpoint=mountpoint, dir=directory)
        return result

    mount = find_v1_mount(mounts, controller, paths.get(controller))
    if controller in paths and mount is not None:
        return found(1, paths[controller], mount)
    if "" in paths:
        for mount in cgroup2_mounts(mounts, paths[""]):
            text, dummy = read_text(os.path.join(root, mount["mount_point"].lstrip("/"), "cgroup.controllers"))
            if text is not None and has_controller(text, controller):
                return found(2, paths[""], mount)
    result["errors"].append("no %s cgroup controller mounted (v1 or v2)" % controller)
    return result
