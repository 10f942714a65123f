# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build processes from a ``/proc`` scan (``gpufleet_build_processes``) and reaping them safely.

What ``ps aux | grep -E "cmake|ninja|cc1plus|nvcc" | wc -l`` means to ask, done right:

- a process is a build process when its *executable name* is one of ``names``: its ``comm``
  (truncated by the kernel to 15 characters), the basename of ``/proc/<pid>/exe`` or the basename
  of ``argv[0]``. The whole command line is never searched for names, so ``vim CMakeLists.txt``,
  ``grep cmake`` and ``python build_cmake.py`` do not count. Command-line regexes are a separate,
  explicit option (``patterns``);
- the scanning process, its ancestors (sh, sshd, ansible-playbook, maybe ``make``) and its
  descendants are never counted, let alone signalled;
- reaping (``_reap``) re-checks that a pid is still the same process (same start time) before every
  signal, because pids are reused, and never reaches into another PID namespace (a container) unasked.

The decisions (build process or not, orphan or not, too broad to reap) are pure functions in
``_process_match``; this file reads ``/proc``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human
from ansible_collections.gpufleet.preflight.plugins.module_utils._process_match import (
    DEFAULT_NAMES,
    PATTERN_TEXT_MAX,
    NameMatcher,
    basename,
    classify_process,
    comm_may_be_cut,
    compile_patterns,
    is_orphan,
    search_patterns,
    service_cgroup,
)

CMDLINE_MAX = 200
# What a scan reads of one command line (issue 18 finding 15: any user can start 5,000 processes with 2 MiB argv
# each). Its name needs argv[0] only (PATH_MAX); patterns search the first PATTERN_TEXT_MAX characters, and all
# command lines read for patterns together stay under CMDLINE_TOTAL_MAX: with many processes each gets less.
ARGV0_READ_MAX = 4096 + 1
CMDLINE_TOTAL_MAX = 16 << 20
# task flags (field 9 of stat): kernel threads are never build processes.
PF_KTHREAD = 0x00200000


# ---------------------------------------------------------------------------------------------
# pure parsers


def parse_stat(text):
    """``/proc/<pid>/stat`` -> dict (pid, comm, state, ppid, pgrp, session, flags, start_ticks, rss_pages).

    ``comm`` sits in parentheses and may itself hold spaces and ``)``: it runs from the first
    ``(`` to the LAST ``)``. ValueError when the text is not a stat line.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    open_at = text.find("(")
    close_at = text.rfind(")")
    if open_at < 0 or close_at < open_at:
        raise ValueError("not a /proc/<pid>/stat line: %r" % (text[:80],))
    rest = text[close_at + 2:].split()
    if len(rest) < 22:
        raise ValueError("short /proc/<pid>/stat line: %r" % (text[:80],))
    return {
        "pid": int(text[:open_at]),
        "comm": text[open_at + 1:close_at],
        "state": rest[0],
        "ppid": int(rest[1]),
        "pgrp": int(rest[2]),
        "session": int(rest[3]),
        "flags": int(rest[6]),
        "start_ticks": int(rest[19]),
        "rss_pages": int(rest[21]),
    }


def parse_status_uid(text):
    """``/proc/<pid>/status`` -> the real uid (first number of the ``Uid:`` line), or None."""
    for line in text.splitlines():
        if line.startswith("Uid:"):
            fields = line.split()
            if len(fields) > 1 and fields[1].isdigit():
                return int(fields[1])
    return None


def split_cmdline(data):
    """``/proc/<pid>/cmdline`` bytes (NUL separated, NUL ended) -> list of str arguments."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    if not data:
        return []
    if data.endswith("\0"):
        data = data[:-1]
    return data.split("\0")


def short_cmdline(argv, limit=CMDLINE_MAX):
    """Arguments joined by spaces, cut to ``limit`` characters (with ``...`` when cut)."""
    line = " ".join(argv)
    if len(line) > limit:
        return line[:limit - 3] + "..."
    return line


def tree_of(pid, parent_of):
    """``pid``, its ancestors and its descendants, given ``{pid: ppid}`` of every process."""
    if pid is None:
        return set()
    tree = set([pid])
    ancestor = parent_of.get(pid)
    while ancestor and ancestor not in tree:
        tree.add(ancestor)
        ancestor = parent_of.get(ancestor)
    children = {}
    for child, parent in parent_of.items():
        children.setdefault(parent, []).append(child)
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return tree


def summarize(processes, names, patterns, scanned, errors=None):
    """The ``gpufleet_build_processes`` facts around a list of process dicts."""
    by_name = {}
    total_rss = 0
    for proc in processes:
        by_name[proc["name"]] = by_name.get(proc["name"], 0) + 1
        total_rss += proc["rss_bytes"] or 0
    return {
        "count": len(processes),
        "by_name": by_name,
        "total_rss_bytes": total_rss,
        "total_rss_human": human(total_rss),
        "scanned": scanned,
        "names": list(names),
        "patterns": [p.pattern if hasattr(p, "pattern") else p for p in patterns],
        "processes": processes,
        "errors": list(errors or []),
    }


def filter_selection(processes, orphaned_only=False, older_than=None, uid=None):
    """Narrow a scan for reaping: only orphans, only older than N seconds, only one user's."""
    if older_than is not None and older_than < 0:
        raise ValueError("older_than: %r must be 0 or more seconds" % (older_than,))
    selected = []
    for proc in processes:
        if orphaned_only and not proc["orphaned"]:
            continue
        if older_than is not None and (proc["age_seconds"] is None or proc["age_seconds"] < older_than):
            continue
        if uid is not None and proc["uid"] != uid:
            continue
        selected.append(proc)
    return selected


# ---------------------------------------------------------------------------------------------
# reading /proc


def _read(path, size=4096, limit=None):
    """The file as bytes (at most ``limit`` of them) with plain os calls (the cheapest way through thousands of
    pids)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, size if limit is None else min(size, limit))
        if len(data) < size or (limit is not None and len(data) >= limit):
            return data
        chunks, total = [data], len(data)
        while data and (limit is None or total < limit):
            data = os.read(fd, 65536 if limit is None else min(65536, limit - total))
            chunks.append(data)
            total += len(data)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_uptime(root="/"):
    """Seconds since boot from ``/proc/uptime``."""
    return float(_read(os.path.join(root, "proc", "uptime")).split()[0])


def read_stat(pid, root="/"):
    """Parsed ``/proc/<pid>/stat`` or None when the process is gone."""
    try:
        return parse_stat(_read(os.path.join(root, "proc", str(pid), "stat")))
    except (OSError, ValueError):
        return None


def _user_name(uid, cache):
    if uid is None:
        return None
    if uid not in cache:
        try:
            import pwd
            cache[uid] = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):
            cache[uid] = str(uid)
    return cache[uid]


def _read_argv(pid_dir, limit):
    """The command line's first ``limit`` bytes as arguments (a cut last argument is kept as read)."""
    return split_cmdline(_read(pid_dir + "/cmdline", limit=limit))


def _classify_at(pid_dir, stat, match_name, limit=ARGV0_READ_MAX):
    """``(matched_by, name, argv)`` for one pid: comm first, then exe and argv[0]; argv None when not read, else
    its first ``limit`` bytes."""
    comm = stat["comm"]
    matched, name = classify_process(comm, match_name)
    if matched:
        return matched, name, None
    argv = _read_argv(pid_dir, limit)
    exe_name = None
    if comm_may_be_cut(comm):
        try:
            exe_name = basename(os.readlink(pid_dir + "/exe"))
        except OSError:
            pass
    matched, name = classify_process(comm, match_name, exe_name, argv)
    return matched, name, argv


def collect_build_processes(names=None, extra_names=(), patterns=(), root="/", self_pid=None,
                            clock_ticks=None, page_size=None, patterns_option="patterns"):
    """Scan ``<root>/proc`` -> ``gpufleet_build_processes`` facts.

    ``names`` replaces DEFAULT_NAMES when given (``[]``: match by ``patterns`` only);
    ``extra_names`` adds to them; ``patterns`` are regexes searched in the command line, within a time
    budget (a catastrophic one is named in a ValueError under ``patterns_option``).
    ``self_pid`` is the process whose tree (itself, ancestors, descendants) is never counted:
    by default this process when ``root`` is ``/``, nobody for a fixture tree.
    ValueError (naming the option) for a bad name or regex.
    """
    names = list(DEFAULT_NAMES if names is None else names)
    names.extend(name for name in extra_names or () if name not in names)
    match_name = NameMatcher(names)
    regexes = compile_patterns(patterns, patterns_option)
    if self_pid is None and root in ("/", ""):
        self_pid = os.getpid()
    clock_ticks = clock_ticks or os.sysconf("SC_CLK_TCK")
    page_size = page_size or os.sysconf("SC_PAGE_SIZE")
    proc_dir = os.path.join(root, "proc")
    errors = []
    try:
        uptime = read_uptime(root)
    except (OSError, ValueError, IndexError) as exc:
        uptime = None
        errors.append("%s: %s" % (os.path.join(proc_dir, "uptime"), getattr(exc, "strerror", None) or exc))
    try:
        pids = [entry for entry in os.listdir(proc_dir) if entry.isdigit()]
    except OSError as exc:
        errors.append("%s: %s" % (proc_dir, exc.strerror or exc))
        return summarize([], names, regexes, 0, errors)

    # patterns read more of each command line than a name needs, within the scan's total
    argv_limit = ARGV0_READ_MAX
    if regexes:
        argv_limit = max(ARGV0_READ_MAX, min(PATTERN_TEXT_MAX + 1, CMDLINE_TOTAL_MAX // max(1, len(pids))))
    parent_of, found, candidates, init = _scan_pids(proc_dir, pids, match_name, regexes, argv_limit)
    if regexes:
        found.extend(_pattern_matches(regexes, candidates, argv_limit, len(pids), patterns_option, errors))
    excluded = tree_of(self_pid, parent_of)
    processes = []
    users = {}
    for stat, argv, matched, name, pid_dir in found:
        if stat["pid"] in excluded:
            continue
        try:
            processes.append(_describe(stat, argv, matched, name, pid_dir, init, uptime, clock_ticks, page_size, users))
        except OSError:
            continue  # gone since
    processes.sort(key=lambda proc: proc["pid"])
    return summarize(processes, names, regexes, len(parent_of), errors)


def _scan_pids(proc_dir, pids, match_name, regexes, argv_limit):
    """One pass over ``/proc/<pid>``: ``(parent_of, found, candidates, init)``.

    ``found``: name matches as ``(stat, argv, matched, name, pid_dir)``; ``candidates``: the other processes'
    ``(stat, argv, pid_dir)`` for the patterns (only when there are patterns); ``init``: pid 1's stat, marked when it
    is a build tool itself (a ninja or make as pid 1 of a container is live, not an orphans' reaper).
    """
    parent_of = {}
    found = []
    candidates = []
    init = None
    for pid_text in pids:
        pid_dir = proc_dir + "/" + pid_text
        try:
            stat = parse_stat(_read(pid_dir + "/stat"))
        except (OSError, ValueError):
            continue  # gone mid-scan, or not a process
        parent_of[stat["pid"]] = stat["ppid"]
        if stat["flags"] & PF_KTHREAD:
            continue
        if stat["pid"] == 1:
            init = dict(stat, build_tool=classify_process(stat["comm"], _DEFAULT_MATCH)[0] is not None)
        try:
            matched, name, argv = _classify_at(pid_dir, stat, match_name, argv_limit)
        except OSError:
            continue  # gone since
        if stat["pid"] == 1 and matched == "name":
            init["build_tool"] = True
        if matched is not None:
            found.append((stat, argv, matched, name, pid_dir))
        elif regexes:
            try:
                candidates.append((stat, argv if argv is not None else _read_argv(pid_dir, argv_limit), pid_dir))
            except OSError:
                continue
    return parent_of, found, candidates, init


def _pattern_matches(regexes, candidates, argv_limit, scanned, patterns_option, errors):
    """The candidates whose command line a pattern finds, as ``found`` entries; a scan that had to cut command lines
    short says so in ``errors`` (a pattern past the cut could not match)."""
    candidates = [item for item in candidates if item[1]]
    if argv_limit <= PATTERN_TEXT_MAX:
        cut = sum(1 for item in candidates if len(item[1]) + sum(len(arg) for arg in item[1]) >= argv_limit)
        if cut:
            errors.append("%s: %d command lines were searched on their first %d bytes only (%d processes share the "
                          "%d bytes a scan reads)" % (patterns_option, cut, argv_limit, scanned, CMDLINE_TOTAL_MAX))
    hits = search_patterns(regexes, [" ".join(argv) for _stat, argv, _dir in candidates], patterns_option)
    return [(stat, argv, "pattern", stat["comm"], pid_dir)
            for number, (stat, argv, pid_dir) in enumerate(candidates) if number in hits]


def _session_cgroup(stat, pid_dir):
    """:func:`service_cgroup` of a session leader re-parented to pid 1 (the one case :func:`is_orphan` asks),
    else None without reading anything."""
    if stat["ppid"] != 1 or stat["session"] != stat["pid"]:
        return None
    try:
        return service_cgroup(_read(pid_dir + "/cgroup").decode("utf-8", "replace"))
    except OSError:
        return None


def _describe(stat, argv, matched, name, pid_dir, init, uptime, clock_ticks, page_size, users):
    """One matched process as the facts show it; OSError when it is gone since the scan."""
    if argv is None:
        argv = _read_argv(pid_dir, ARGV0_READ_MAX)  # a name match: the short command line is all it shows
    uid = parse_status_uid(_read(pid_dir + "/status").decode("utf-8", "replace"))
    age = None
    if uptime is not None:
        age = max(0, int(uptime - stat["start_ticks"] / float(clock_ticks)))
    return {
        "pid": stat["pid"],
        "ppid": stat["ppid"],
        "name": name,
        "comm": stat["comm"],
        "user": _user_name(uid, users),
        "uid": uid,
        "state": stat["state"],
        "start_ticks": stat["start_ticks"],
        "age_seconds": age,
        "rss_bytes": stat["rss_pages"] * page_size,
        "cmdline": short_cmdline(argv) if argv else "[%s]" % stat["comm"],
        "orphaned": is_orphan(stat, init, _session_cgroup(stat, pid_dir), clock_ticks),
        "zombie": stat["state"] == "Z",
        "matched_by": matched,
    }


_DEFAULT_MATCH = NameMatcher(DEFAULT_NAMES)
