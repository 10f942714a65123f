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
- reaping re-checks that a pid is still the same process (same start time) before every signal,
  because pids are reused, and never reaches into another PID namespace (a container) unasked.

The decisions (build process or not, orphan or not, too broad to reap) are pure functions in
``_process_match``; this file reads ``/proc`` and sends the signals.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import signal
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human
from ansible_collections.gpufleet.preflight.plugins.module_utils._process_match import (
    DEFAULT_NAMES,
    NameMatcher,
    basename,
    classify_process,
    comm_may_be_cut,
    compile_patterns,
    is_orphan,
    search_patterns,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import seconds

CMDLINE_MAX = 200
# The longest grace reaping waits between SIGTERM and SIGKILL: an hour is already far more than a compiler needs.
MAX_GRACE = 3600.0
# task flags (field 9 of stat): kernel threads are never build processes.
PF_KTHREAD = 0x00200000
# Reaping a process whose /proc/<pid>/ns/pid differs from ours would reach into a container.
OTHER_NAMESPACE = "in another PID namespace (a container): not signalled; set allow_broad: true to reach into it"


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
    if older_than is not None:
        older_than = seconds(older_than, "older_than", maximum=float("1e12"))
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


def _read(path, size=4096):
    """Whole file as bytes with plain os calls (the cheapest way through thousands of pids)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, size)
        if len(data) < size:
            return data
        chunks = [data]
        while data:
            data = os.read(fd, 65536)
            chunks.append(data)
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


def _read_argv(pid_dir):
    return split_cmdline(_read(pid_dir + "/cmdline"))


def _classify_at(pid_dir, stat, match_name):
    """``(matched_by, name, argv)`` for one pid: comm first, then exe and argv[0]; argv None when not read."""
    comm = stat["comm"]
    matched, name = classify_process(comm, match_name)
    if matched:
        return matched, name, None
    argv = _read_argv(pid_dir)
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

    parent_of = {}
    found = []
    candidates = []  # (stat, argv, pid_dir) for the patterns
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
            matched, name, argv = _classify_at(pid_dir, stat, match_name)
        except OSError:
            continue  # gone since
        if stat["pid"] == 1 and matched == "name":
            init["build_tool"] = True
        if matched is not None:
            found.append((stat, argv, matched, name, pid_dir))
        elif regexes:
            try:
                candidates.append((stat, argv if argv is not None else _read_argv(pid_dir), pid_dir))
            except OSError:
                continue
    candidates = [item for item in candidates if item[1]]
    hits = search_patterns(regexes, [" ".join(argv) for _stat, argv, _dir in candidates], patterns_option)
    found.extend((stat, argv, "pattern", stat["comm"], pid_dir)
                 for number, (stat, argv, pid_dir) in enumerate(candidates) if number in hits)

    excluded = tree_of(self_pid, parent_of)
    processes = []
    users = {}
    for stat, argv, matched, name, pid_dir in found:
        if stat["pid"] in excluded:
            continue
        try:
            if argv is None:
                argv = _read_argv(pid_dir)
            uid = parse_status_uid(_read(pid_dir + "/status").decode("utf-8", "replace"))
        except OSError:
            continue  # gone since
        age = None
        if uptime is not None:
            age = max(0, int(uptime - stat["start_ticks"] / float(clock_ticks)))
        processes.append({
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
            "orphaned": is_orphan(stat, init),
            "zombie": stat["state"] == "Z",
            "matched_by": matched,
        })
    processes.sort(key=lambda proc: proc["pid"])
    return summarize(processes, names, regexes, len(parent_of), errors)


_DEFAULT_MATCH = NameMatcher(DEFAULT_NAMES)


# ---------------------------------------------------------------------------------------------
# reaping


def _alive(pid, start_ticks, root="/"):
    """Still the same, still running process? Gone, reused, or a zombie (already dead) -> False."""
    stat = read_stat(pid, root)
    return stat is not None and stat["start_ticks"] == start_ticks and stat["state"] not in ("Z", "X", "x")


class _Handle:
    """A process to signal: through a pidfd when the platform has one (no pid-reuse race),
    else by pid, re-verified just before each signal."""

    def __init__(self, proc, root):
        self.proc = proc
        self.pid = proc["pid"]
        self.start_ticks = proc["start_ticks"]
        self.root = root
        self.pidfd = None
        self.error = None
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is not None and hasattr(signal, "pidfd_send_signal"):
            try:
                self.pidfd = pidfd_open(self.pid)
            except OSError:
                self.pidfd = None
        # Checked AFTER opening the pidfd: if the start time still matches, the pidfd is this process.

    def alive(self):
        return _alive(self.pid, self.start_ticks, self.root)

    def send(self, signum):
        """True when the signal went to this very process."""
        if not self.alive():
            return False
        try:
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signum)
            else:
                os.kill(self.pid, signum)
        except OSError as exc:
            if exc.errno != errno.ESRCH:
                self.error = "%s: %s" % (signal.Signals(signum).name, exc.strerror or exc)
            return False
        return True

    def close(self):
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def protected_pids(self_pid=None, root="/"):
    """pid 1, ``self_pid`` (default: this process) and all its ancestors: never signalled."""
    self_pid = os.getpid() if self_pid is None else self_pid
    protected = set([1, self_pid])
    pid = self_pid
    while pid and pid > 1:
        stat = read_stat(pid, root)
        if stat is None:
            break
        pid = stat["ppid"]
        protected.add(pid)
    protected.discard(0)
    return protected


def _brief(proc, **extra):
    brief = dict((key, proc.get(key)) for key in ("pid", "ppid", "name", "user", "start_ticks", "cmdline"))
    brief.update(extra)
    return brief


def _wait_gone(handles, seconds, clock, sleep, poll=0.05):
    """Poll until every handle is gone or ``seconds`` passed; returns those still alive."""
    deadline = clock() + seconds
    alive = [h for h in handles if h.alive()]
    while alive and clock() < deadline:
        sleep(min(poll, max(0.0, deadline - clock())))
        alive = [h for h in alive if h.alive()]
        poll = min(poll * 2, 0.5)
    return alive


def pid_namespace(pid="self", root="/"):
    """The PID namespace of ``pid`` (``pid:[4026531836]``), or None when unreadable (gone, or not ours to see)."""
    try:
        return os.readlink(os.path.join(root, "proc", str(pid), "ns", "pid"))
    except OSError:
        return None


def reap(selection, grace=10.0, check_mode=False, root="/", self_pid=None, kill_wait=5.0,
         clock=time.monotonic, sleep=time.sleep, all_namespaces=False):
    """SIGTERM ``selection`` (process dicts from collect_build_processes), wait up to ``grace``
    seconds, SIGKILL what remains.

    Before every signal the pid must still be the same process (same ``start_ticks``); pid 1,
    ``self_pid`` and its ancestors are never signalled; nothing outside ``selection`` is touched; unless
    ``all_namespaces``, nothing in another PID namespace (a container seen from its host) either.
    Returns ``{killed: [{pid, ..., how: term|kill}], remaining: [{pid, ..., reason}],
    would_kill: [...] (check mode), changed}``.
    """
    grace = seconds(grace, "grace", maximum=MAX_GRACE)
    protected = protected_pids(self_pid, root)
    own_namespace = pid_namespace("self", root)
    remaining = []
    targets = []
    for proc in selection:
        if proc["pid"] in protected:
            remaining.append(_brief(proc, reason="protected: pid 1, this process or one of its ancestors"))
        elif proc.get("zombie") or proc.get("state") == "Z":
            remaining.append(_brief(proc, reason="zombie: already dead, only its parent (pid %s) can reap it" % proc["ppid"]))
        elif not all_namespaces and (own_namespace is None or pid_namespace(proc["pid"], root) != own_namespace):
            if _alive(proc["pid"], proc["start_ticks"], root):
                remaining.append(_brief(proc, reason=OTHER_NAMESPACE))
        elif _alive(proc["pid"], proc["start_ticks"], root):
            targets.append(proc)
        # else: gone (or its pid reused) since the scan: nothing to do, nothing to report
    if check_mode:
        return {"killed": [], "remaining": remaining, "would_kill": [_brief(p) for p in targets],
                "changed": bool(targets)}

    handles = [_Handle(proc, root) for proc in targets]
    killed = []
    try:
        termed = [h for h in handles if h.send(signal.SIGTERM)]
        stubborn = _wait_gone(termed, grace, clock, sleep)
        killed.extend(_brief(h.proc, how="term") for h in termed if h not in stubborn)
        sent_kill = [h for h in stubborn if h.send(signal.SIGKILL)]
        # gone between the grace deadline and SIGKILL: SIGTERM did it after all
        killed.extend(_brief(h.proc, how="term") for h in stubborn if h not in sent_kill)
        survivors = _wait_gone(sent_kill, kill_wait, clock, sleep)
        killed.extend(_brief(h.proc, how="kill") for h in sent_kill if h not in survivors)
        remaining.extend(_brief(h.proc, reason="still running %ss after SIGKILL (uninterruptible sleep?)" % kill_wait)
                         for h in survivors)
        remaining.extend(_brief(h.proc, reason="cannot signal: %s" % h.error) for h in handles if h.error)
    finally:
        for handle in handles:
            handle.close()
    killed.sort(key=lambda item: item["pid"])
    return {"killed": killed, "remaining": remaining, "would_kill": [], "changed": bool(killed)}
