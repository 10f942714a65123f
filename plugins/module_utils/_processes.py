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
  because pids are reused.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fnmatch
import os
import re
import signal
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human

DEFAULT_NAMES = (
    "cmake", "ninja", "make", "gmake",
    "cc1", "cc1plus", "collect2", "ld", "ld.*",
    "cicc", "ptxas", "nvcc", "nvlink", "fatbinary", "cudafe++",
)

# The kernel keeps TASK_COMM_LEN - 1 = 15 bytes of the executable's name in comm.
COMM_MAX = 15
CMDLINE_MAX = 200
# task flags (field 9 of stat): kernel threads are never build processes.
PF_KTHREAD = 0x00200000
_GLOB_CHARS = frozenset("*?[")


# ---------------------------------------------------------------------------------------------
# pure parsers


def parse_stat(text):
    """``/proc/<pid>/stat`` -> dict (pid, comm, state, ppid, flags, start_ticks, rss_pages).

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


def basename(path):
    """Basename of an executable path; ``/proc/<pid>/exe`` adds `` (deleted)`` for a removed file."""
    if path.endswith(" (deleted)"):
        path = path[:-len(" (deleted)")]
    return path.rstrip("/").rsplit("/", 1)[-1]


class NameMatcher:
    """Exact basenames in a set, globs (``ld.*``) as one compiled regex; ``None`` never matches."""

    def __init__(self, names):
        self.names = list(names)
        for name in self.names:
            if not isinstance(name, str) or not name.strip():
                raise ValueError("names: %r is not a process name" % (name,))
            if "/" in name:
                raise ValueError("names: %r holds '/'; give an executable's basename such as ninja or ld.*" % (name,))
        self.exact = frozenset(n for n in self.names if not _GLOB_CHARS.intersection(n))
        globs = [n for n in self.names if _GLOB_CHARS.intersection(n)]
        self.glob = re.compile("|".join(fnmatch.translate(g) for g in globs)) if globs else None
        # names the kernel truncates in comm: their first 15 characters mark a candidate
        self.truncated = frozenset(n[:COMM_MAX] for n in self.exact if len(n) > COMM_MAX)

    def __call__(self, name):
        if not name:
            return False
        if name in self.exact:
            return True
        return bool(self.glob is not None and self.glob.match(name))


def compile_patterns(patterns):
    """Command-line regexes -> compiled; ValueError naming the option and the ``re`` error."""
    compiled = []
    for pattern in patterns or ():
        if not isinstance(pattern, str) or pattern == "":
            raise ValueError("patterns: %r is not a regular expression" % (pattern,))
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ValueError("patterns: %r is not a valid regular expression: %s" % (pattern, exc))
    return compiled


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


def collect_build_processes(names=None, extra_names=(), patterns=(), root="/", self_pid=None,
                            clock_ticks=None, page_size=None):
    """Scan ``<root>/proc`` -> ``gpufleet_build_processes`` facts.

    ``names`` replaces DEFAULT_NAMES when given (``[]``: match by ``patterns`` only);
    ``extra_names`` adds to them; ``patterns`` are regexes searched in the command line.
    ``self_pid`` is the process whose tree (itself, ancestors, descendants) is never counted:
    by default this process when ``root`` is ``/``, nobody for a fixture tree.
    ValueError (naming the option) for a bad name or regex.
    """
    names = list(DEFAULT_NAMES if names is None else names)
    names.extend(name for name in extra_names or () if name not in names)
    match_name = NameMatcher(names)
    regexes = compile_patterns(patterns)
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
    for pid_text in pids:
        pid_dir = proc_dir + "/" + pid_text
        try:
            stat = parse_stat(_read(pid_dir + "/stat"))
        except (OSError, ValueError):
            continue  # gone mid-scan, or not a process
        parent_of[stat["pid"]] = stat["ppid"]
        if stat["flags"] & PF_KTHREAD:
            continue
        comm = stat["comm"]
        argv = None
        matched = name = None
        maybe_cut = len(comm) == COMM_MAX  # the kernel may have cut a longer name
        if not maybe_cut and match_name(comm):
            matched, name = "name", comm
        else:
            try:
                argv = split_cmdline(_read(pid_dir + "/cmdline"))
            except OSError:
                continue
            exe_name = None
            if maybe_cut:
                try:
                    exe_name = basename(os.readlink(pid_dir + "/exe"))
                except OSError:
                    pass
            argv0_name = basename(argv[0]) if argv else None
            for candidate in (exe_name, argv0_name):
                if candidate and match_name(candidate):
                    matched, name = "name", candidate
                    break
            else:
                if maybe_cut and not exe_name and not argv0_name and (match_name(comm) or comm in match_name.truncated):
                    matched, name = "name", comm  # nothing better to go on (zombie, unreadable exe)
            if matched is None and regexes and argv:
                line = " ".join(argv)
                if any(regex.search(line) for regex in regexes):
                    matched, name = "pattern", comm
        if matched is None:
            continue
        if argv is None:
            try:
                argv = split_cmdline(_read(pid_dir + "/cmdline"))
            except OSError:
                continue
        found.append((stat, argv, matched, name, pid_dir))

    excluded = tree_of(self_pid, parent_of)
    processes = []
    users = {}
    for stat, argv, matched, name, pid_dir in found:
        if stat["pid"] in excluded:
            continue
        try:
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
            "orphaned": stat["ppid"] == 1 and stat["pid"] != 1,
            "zombie": stat["state"] == "Z",
            "matched_by": matched,
        })
    processes.sort(key=lambda proc: proc["pid"])
    return summarize(processes, names, regexes, len(parent_of), errors)


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


def reap(selection, grace=10.0, check_mode=False, root="/", self_pid=None, kill_wait=5.0,
         clock=time.monotonic, sleep=time.sleep):
    """SIGTERM ``selection`` (process dicts from collect_build_processes), wait up to ``grace``
    seconds, SIGKILL what remains.

    Before every signal the pid must still be the same process (same ``start_ticks``); pid 1,
    ``self_pid`` and its ancestors are never signalled; nothing outside ``selection`` is touched.
    Returns ``{killed: [{pid, ..., how: term|kill}], remaining: [{pid, ..., reason}],
    would_kill: [...] (check mode), changed}``.
    """
    if grace is None or grace < 0:
        raise ValueError("grace: %r must be 0 or more seconds" % (grace,))
    protected = protected_pids(self_pid, root)
    remaining = []
    targets = []
    for proc in selection:
        if proc["pid"] in protected:
            remaining.append(_brief(proc, reason="protected: pid 1, this process or one of its ancestors"))
        elif proc.get("zombie") or proc.get("state") == "Z":
            remaining.append(_brief(proc, reason="zombie: already dead, only its parent (pid %s) can reap it" % proc["ppid"]))
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
