# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a process's cgroup lives in cgroupfs (v1 per controller, v2 unified), without systemd.

The one home for ``/proc/<pid>/cgroup`` parsing, choosing the cgroup mount, the cgroup's directory
under it, the walk up its ancestors and the rule that the tightest limit over them counts; memory, cpus and
guarded_build all build on these. Also the kernel's id-list format (``0-3,8``) that cpusets and
``/sys/devices/system/{cpu,node}/online`` share.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._mountinfo import parse_mountinfo
from ansible_collections.gpufleet.preflight.plugins.module_utils._paths import is_within

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
    inside = [mount for mount in candidates if is_within(cgroup_path, mount["root"])]
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
    elif is_within(path, root):
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
    while current != top and is_within(current, top):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
        chain.append(current)
    return chain


# ---------------------------------------------------------------- pure rules over what was read

def parse_id_list(text):
    """Kernel id list (``0-3,8,10-11``: cpus, NUMA nodes, cpusets) -> sorted list of ints; ValueError on anything else."""
    ids = set()
    for chunk in text.strip().split(","):
        chunk = chunk.strip()
        if not chunk:
            continue
        first, sep, last = chunk.partition("-")
        first = int(first)
        last = int(last) if sep else first
        if first < 0 or last < first:
            raise ValueError("%r is not a range of ids" % chunk)
        ids.update(range(first, last + 1))
    return sorted(ids)


def tightest(levels):
    """``[(where, value or None), ...]`` innermost first -> ``(value, where)`` of the smallest value.

    The rule for limits over a cgroup and its ancestors: a parent's limit caps every child, so the smallest
    one counts; ``None`` (no limit at that level) is skipped; on a tie the innermost level is named.
    ``(None, None)`` when no level has a value.
    """
    best_value, best_where = None, None
    for where, value in levels:
        if value is not None and (best_value is None or value < best_value):
            best_value, best_where = value, where
    return best_value, best_where


# ---------------------------------------------------------------- I/O

def read_text(path, name=None):
    """The file's text, or ``None`` plus the reason: ``(text, error)``; the error names ``name`` or ``path``."""
    try:
        with open(path) as handle:
            return handle.read(), None
    except (IOError, OSError) as exc:
        return None, "%s: %s" % (name or path, exc.strerror or exc)


def under_root(root, node_path):
    """A path as the node names it, found under ``root``: ``("/tmp/tree", "/proc/meminfo")`` -> ``/tmp/tree/proc/meminfo``."""
    return os.path.join(root, node_path.lstrip("/"))


def locate_controller(controller, root="/", pid="self"):
    """Find ``pid``'s cgroup directory for ``controller`` (``memory``, ``cpu``): the one way every collector does it.

    Returns ``{'version': 1|2|None, 'path': cgroup path, 'dir', 'mountpoint': directories under ``root``,
    'node_dir', 'node_mountpoint': the same as the node names them, 'errors': [...]}``. v1 wins when the
    controller is mounted as v1 (a hybrid host mounts cgroup2 without the memory controller); otherwise every
    cgroup2 mount is tried, best first, and the first whose ``cgroup.controllers`` lists the controller is used.
    Errors name files as the node names them; a located cgroup may still carry a note in ``errors``.
    """
    result = {"version": None, "path": None, "dir": None, "mountpoint": None, "node_dir": None,
              "node_mountpoint": None, "errors": []}
    cgroup_file = "/proc/%s/cgroup" % pid
    mountinfo_file = "/proc/%s/mountinfo" % pid
    cgroup_text, cgroup_error = read_text(under_root(root, cgroup_file), cgroup_file)
    mountinfo_text, mountinfo_error = read_text(under_root(root, mountinfo_file), mountinfo_file)
    if cgroup_error or mountinfo_error:
        result["errors"].extend(error for error in (cgroup_error, mountinfo_error) if error)
        return result
    paths = parse_proc_cgroup(cgroup_text)
    mounts = parse_cgroup_mountinfo(mountinfo_text)

    def found(version, path, mount):
        node_dir, note = cgroup_dir_in_mount(mount, path)
        result.update(version=version, path=path, node_dir=node_dir, node_mountpoint=mount["mount_point"],
                      dir=under_root(root, node_dir), mountpoint=under_root(root, mount["mount_point"]))
        if note:
            result["errors"].append(note)
        return result

    mount = find_v1_mount(mounts, controller, paths.get(controller))
    if controller in paths and mount is not None:
        return found(1, paths[controller], mount)
    without = None
    if "" in paths:
        for mount in cgroup2_mounts(mounts, paths[""]):
            controllers_file = mount["mount_point"].rstrip("/") + "/cgroup.controllers"
            text, error = read_text(under_root(root, controllers_file), controllers_file)
            if text is None:
                result["errors"].append(error)
            elif has_controller(text, controller):
                return found(2, paths[""], mount)
            elif without is None:
                without = (controllers_file, mount["mount_point"])
    if without is not None:
        result["errors"].append("%s: no %s controller in cgroup v2 at %s and none in v1" % (without[0], controller, without[1]))
    elif not result["errors"]:
        result["errors"].append("%s, %s: no %s cgroup mounted (v1 or v2)" % (cgroup_file, mountinfo_file, controller))
    return result
