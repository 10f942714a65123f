# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Memory as ``free -h`` shows it *and* as the memory cgroup limits it -> ``gpufleet_memory``.

``free`` reads ``/proc/meminfo``, which is not container aware: inside a container capped at
2 GiB on a 449 GiB host it still prints 449Gi. So next to the host view we read the process's
memory cgroup (v1 or v2), walk its ancestors for the tightest limit, and report the effective
total/available as the smaller of the two.

Pure parsers first; the readers (``collect_memory`` and its helpers, which take a ``root``
so tests point them at fixture trees) sit at the bottom.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._cgroupfs import (
    ancestors,
    locate_controller,
    parse_id_list,
    read_text,
    tightest,
    under_root,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import with_human
from ansible_collections.gpufleet.preflight.plugins.module_utils._paths import is_within

# cgroup v1 writes "no limit" as PAGE_COUNTER_MAX * PAGE_SIZE (9223372036854771712 on 4 KiB
# pages, other values on other page sizes); anything this large is no limit at all.
V1_UNLIMITED_FROM = 2 ** 62

HOST_FIELDS = ("total", "used", "free", "shared", "buff_cache", "available", "swap_total", "swap_used", "swap_free")
PSI_KINDS = ("some", "full")
PSI_FIELDS = ("avg10", "avg60", "avg300", "total")


# --------------------------------------------------------------------------------------------
# /proc/meminfo -> the `free` view
# --------------------------------------------------------------------------------------------

def parse_meminfo(text):
    """``/proc/meminfo`` text -> ``{field: bytes}``; ``kB`` values are turned into bytes.

    Unit-less fields (``HugePages_Total``) are counts and stay as they are.
    """
    fields = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if not parts:
            continue
        try:
            value = int(parts[0])
        except ValueError:
            continue
        if len(parts) > 1 and parts[1].lower() == "kb":
            value *= 1024
        fields[name.strip()] = value
    return fields


def free_view(meminfo):
    """The ``host`` dict: every column of ``free -h`` (procps-ng 4) in bytes, ``*_human`` beside.

    ``available_estimated`` says whether MemAvailable was missing (kernel < 3.14) and
    ``free + buff/cache`` stood in for it.
    """
    total = meminfo.get("MemTotal", 0)
    free = meminfo.get("MemFree", 0)
    # procps-ng: buff/cache = Buffers + Cached + SReclaimable (reclaimable slab counts as cache).
    buff_cache = meminfo.get("Buffers", 0) + meminfo.get("Cached", 0) + meminfo.get("SReclaimable", 0)
    estimated = "MemAvailable" not in meminfo
    available = min(total, free + buff_cache) if estimated else meminfo["MemAvailable"]
    # procps-ng >= 4.0 defines used = total - available (3.3.x used total - free - buff/cache);
    # we follow the newer one, which is what the seed's `free -h` printed.
    used = max(0, total - available)
    swap_total = meminfo.get("SwapTotal", 0)
    swap_free = meminfo.get("SwapFree", 0)
    values = {
        "total": total,
        "used": used,
        "free": free,
        "shared": meminfo.get("Shmem", 0),
        "buff_cache": buff_cache,
        "available": available,
        "swap_total": swap_total,
        "swap_used": max(0, swap_total - swap_free),
        "swap_free": swap_free,
    }
    host = {}
    for name in HOST_FIELDS:
        host.update(with_human(name, values[name]))
    host["available_estimated"] = estimated
    return host


# --------------------------------------------------------------------------------------------
# cgroup file parsers
# --------------------------------------------------------------------------------------------

def parse_v1_limit(text):
    """``memory.limit_in_bytes`` -> bytes, or None when it means "no limit"."""
    value = int(text.strip())
    return None if value >= V1_UNLIMITED_FROM else value


def parse_v2_limit(text):
    """``memory.max`` / ``memory.high`` -> bytes, or None for ``max``."""
    value = text.strip()
    return None if value == "max" else int(value)


def parse_flat_keyed(text):
    """``key value`` lines (memory.stat, memory.events, memory.oom_control, /proc/vmstat) -> ``{key: int}``."""
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                values[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return values


def parse_oom_kill_count(text):
    """v1 ``memory.oom_control`` / v2 ``memory.events`` text -> the ``oom_kill`` count, or None (v1 before 4.13)."""
    return None if text is None else parse_flat_keyed(text).get("oom_kill")


def inactive_file_from_stat(stat, version):
    """Reclaimable page cache from memory.stat; v1 prefers the hierarchical ``total_`` counter."""
    if version == 1 and "total_inactive_file" in stat:
        return stat["total_inactive_file"]
    return stat.get("inactive_file")


def working_set(usage, inactive_file):
    """Kubelet's rule: what the cgroup cannot drop under pressure = usage - inactive_file, never below 0."""
    if usage is None:
        return None
    return max(0, usage - (inactive_file or 0))


def parse_pressure(text):
    """``/proc/pressure/memory`` -> ``{present: True, some: {avg10, avg60, avg300, total}, full: {...}}``."""
    result = {"present": True}
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] not in PSI_KINDS:
            continue
        values = {}
        for item in parts[1:]:
            key, sep, raw = item.partition("=")
            if sep and key in PSI_FIELDS:
                values[key] = int(raw) if key == "total" else float(raw)
        result[parts[0]] = values
    return result


def effective_view(host, cgroup):
    """min(host, cgroup) for total and available; ``limited_by`` names the side that bounds *available*.

    Available never exceeds the effective total (a limit whose usage could not be read still caps it).
    """
    total = host["total_bytes"]
    limit = cgroup.get("limit_bytes")
    if limit is not None:
        total = min(total, limit)
    available = host["available_bytes"]
    limited_by = "host"
    for candidate in (cgroup.get("available_bytes"), limit):
        if candidate is not None and candidate < available:
            available = candidate
            limited_by = "cgroup"
    result = {"limited_by": limited_by}
    result.update(with_human("total", total))
    result.update(with_human("available", available))
    return result


# --------------------------------------------------------------------------------------------
# readers: everything below touches the filesystem, relative to `root`
# --------------------------------------------------------------------------------------------

def read_node_text(root, node_path):
    """``(text, None)`` or ``(None, "<node path>: <why>")`` for a file the node names ``node_path``, read under ``root``."""
    return read_text(under_root(root, node_path), node_path)


def _read_parsed(root, node_path, parser, errors, fallback):
    """Read and parse one file; on failure append ``"<path>: <why>; <fallback>"`` and return None."""
    text, error = read_node_text(root, node_path)
    if error is None:
        try:
            return parser(text)
        except ValueError as exc:
            error = "%s: unreadable value %r (%s)" % (node_path, text.strip()[:40], exc)
    errors.append("%s; %s" % (error, fallback) if fallback else error)
    return None


def _empty_cgroup(errors):
    cgroup = {
        "version": None, "path": None, "dir": None, "limit_dir": None, "limit_path": None,
        "oom": None, "oom_kill": None, "errors": errors,
    }
    for name in ("limit", "high", "usage", "inactive_file", "working_set", "available"):
        cgroup.update(with_human(name, None))
    return cgroup


_FILES = {
    1: {"limit": "memory.limit_in_bytes", "usage": "memory.usage_in_bytes", "stat": "memory.stat",
        "oom": "memory.oom_control"},
    2: {"limit": "memory.max", "usage": "memory.current", "stat": "memory.stat",
        "oom": "memory.events", "high": "memory.high"},
}


def _read_usage(root, directory, version, errors):
    """``(usage, inactive_file)`` of one cgroup dir; a missing memory.stat counts nothing as reclaimable."""
    names = _FILES[version]
    usage = _read_parsed(root, directory + "/" + names["usage"], lambda text: int(text.strip()), errors, "usage unknown")
    stat = _read_parsed(root, directory + "/" + names["stat"], parse_flat_keyed, errors,
                        "inactive_file taken as 0 (working set = usage)")
    inactive = inactive_file_from_stat(stat, version) if stat is not None else None
    if stat is not None and inactive is None:
        errors.append("%s/%s: no inactive_file line; inactive_file taken as 0 (working set = usage)" % (directory, names["stat"]))
    return usage, inactive


def limit_path(path, directory, limit_dir):
    """The cgroup path (as ``/proc/self/cgroup`` and the kernel's OOM lines name it) of the level whose limit
    binds: the node's memory domain. ``limit_dir`` is ``directory`` or one of its ancestors, so the path loses
    as many components as the directory does. None when nothing limits; ``path`` itself when the limit is v1's
    ``hierarchical_memory_limit`` (an ancestor this view cannot see)."""
    if not limit_dir or path is None or directory is None:
        return None
    if not is_within(directory, limit_dir):
        return path
    levels_up = len([part for part in directory[len(limit_dir.rstrip("/")):].split("/") if part])
    parts = [part for part in path.split("/") if part]
    return "/" + "/".join(parts[:max(0, len(parts) - levels_up)])


def read_cgroup_memory(root, version, path, directory, mount_point, errors):
    """The ``cgroup`` dict for a located memory cgroup; every unreadable file lands in ``errors``.

    The limit is the tightest over the cgroup and its ancestors (a parent's limit caps its
    children). ``available`` is the smallest ``limit - working_set`` over the limited levels,
    since an ancestor's limit is shared with its other children; usage and working set are
    the process's own cgroup.
    """
    names = _FILES[version]
    parse_limit = parse_v1_limit if version == 1 else parse_v2_limit
    cgroup = _empty_cgroup(errors)
    cgroup.update({"version": version, "path": path, "dir": directory})

    at_v2_root = version == 2 and directory == (mount_point.rstrip("/") or "/")
    # The v2 root cgroup is never limited and may lack memory.current: missing files there are no error.
    usage, inactive = _read_usage(root, directory, version, [] if at_v2_root else errors)
    own_working_set = working_set(usage, inactive)
    cgroup.update(with_human("usage", usage))
    cgroup.update(with_human("inactive_file", inactive))
    cgroup.update(with_human("working_set", own_working_set))

    limits, headroom = [], []  # (level, bytes) innermost first: the tightest of each counts
    v2_mount_root = mount_point.rstrip("/") or "/"
    for level in ancestors(directory, mount_point):
        # The host's v2 root cgroup has no memory.max (never limited): its absence there is no error. A cgroup
        # namespace's root (what a container mounts) is a real cgroup whose memory.max is the container's limit.
        level_errors = [] if version == 2 and level == v2_mount_root else errors
        level_limit = _read_parsed(root, level + "/" + names["limit"], parse_limit, level_errors,
                                   "this level taken as unlimited")
        if level_limit is None:
            continue
        level_working_set = own_working_set if level == directory else working_set(*_read_usage(root, level, version, errors))
        limits.append((level, level_limit))
        if level_working_set is not None:
            # an ancestor's limit is shared with its other children: what is left under it is what counts
            headroom.append((level, max(0, level_limit - level_working_set)))

    if version == 1:
        # A container that sees only its own sub-tree cannot walk to the ancestors that limit
        # it; v1's hierarchical_memory_limit already folds them in.
        stat_text, _ignored = read_node_text(root, directory + "/memory.stat")
        hierarchical = parse_flat_keyed(stat_text or "").get("hierarchical_memory_limit")
        if hierarchical is not None and hierarchical < V1_UNLIMITED_FROM:
            where = directory + "/memory.stat:hierarchical_memory_limit"
            limits.append((where, hierarchical))
            if own_working_set is not None:
                headroom.append((where, max(0, hierarchical - own_working_set)))
    limit, limit_dir = tightest(limits)
    available, _where = tightest(headroom)

    cgroup["limit_dir"] = limit_dir
    cgroup["limit_path"] = limit_path(path, directory, limit_dir)
    cgroup.update(with_human("limit", limit))
    cgroup.update(with_human("available", available))

    own_errors = [] if at_v2_root else errors  # nor memory.high / memory.events at the v2 root
    if version == 2:
        high = _read_parsed(root, directory + "/memory.high", parse_v2_limit, own_errors, "memory.high unknown")
        cgroup.update(with_human("high", high))
    counters = _read_parsed(root, directory + "/" + names["oom"], parse_flat_keyed, own_errors, "OOM-kill counter unknown")
    if counters is not None:
        cgroup["oom_kill"] = counters.get("oom_kill")
        # v2 also counts how often the limit was hit and the OOM killer invoked; v1 has no such counter.
        cgroup["oom"] = counters.get("oom") if version == 2 else None
    return cgroup


def read_pressure(root="/"):
    """PSI for memory, or ``{present: False, reason}`` (kernel < 4.20 or booted with psi=0)."""
    text, error = read_node_text(root, "/proc/pressure/memory")
    if error is not None:
        return {"present": False, "reason": error}, error
    return parse_pressure(text), None


def sees_kernel_threads(root="/"):
    """Whether this process sees the host's PID namespace: kernel threads (pid 2, kthreadd) are visible only
    there. A node that does is the whole machine; one that does not is a container on it."""
    text, error = read_node_text(root, "/proc/2/comm")
    return error is None and text.strip() == "kthreadd"


def collect_memory(root="/", proc_self="self"):
    """``gpufleet_memory`` facts for the process ``/proc/<proc_self>``, every path read under ``root``.

    Never raises on a missing or unreadable file: it lands in ``errors`` as
    ``"<path>: <why>; <fallback used>"``.
    """
    errors = []
    meminfo = _read_parsed(root, "/proc/meminfo", parse_meminfo, errors, "host view empty (all 0)")
    host = free_view(meminfo or {})
    if host["available_estimated"] and meminfo is not None:
        errors.append("/proc/meminfo: no MemAvailable (kernel < 3.14); available estimated as free + buff/cache")

    where = locate_controller("memory", root=root, pid=proc_self)
    cgroup_errors = where["errors"]
    if where["version"] is None:
        cgroup_errors[:] = ["%s; no cgroup limit known" % error for error in cgroup_errors]
        cgroup = _empty_cgroup(cgroup_errors)
    else:
        cgroup = read_cgroup_memory(root, where["version"], where["path"], where["node_dir"], where["node_mountpoint"],
                                    cgroup_errors)
    errors.extend(cgroup_errors)

    pressure, pressure_error = read_pressure(root)
    if pressure_error:
        errors.append(pressure_error + "; pressure.present false")

    vmstat = _read_parsed(root, "/proc/vmstat", parse_flat_keyed, errors, "host oom_kills unknown")
    host_oom_kills = vmstat.get("oom_kill") if vmstat is not None else None
    if vmstat is not None and host_oom_kills is None:
        errors.append("/proc/vmstat: no oom_kill line (kernel < 4.13); host oom_kills unknown")

    nodes = _read_parsed(root, "/sys/devices/system/node/online", parse_id_list, errors, "NUMA count unknown")
    numa = {"nodes": nodes or [], "count": len(nodes) if nodes is not None else None}

    return {
        "host": host,
        "cgroup": cgroup,
        "host_pid_namespace": sees_kernel_threads(root),
        "effective": effective_view(host, cgroup),
        "pressure": pressure,
        "oom_kills": {"host": host_oom_kills, "cgroup": cgroup["oom_kill"]},
        "numa": numa,
        "errors": errors,
    }
