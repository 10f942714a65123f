# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which processes are build processes, which are orphans, and which selections are too broad to reap.

Every decision here is a pure function over what ``_processes`` read from ``/proc``, so each is tested from a
table: :func:`classify_process` (executable name, the kernel's 15-character ``comm``, command-line patterns),
:func:`is_orphan` (original parent gone, not merely "parent pid 1"), :func:`broad_names` and
:func:`non_build_selected` (refusals before reaping). :func:`compile_patterns` is the one validation of a
process regex (node_facts, build_processes and the readiness policy use it); :func:`search_patterns` runs the
regexes against command lines in a worker with a time budget, because one catastrophic regex would otherwise
hang the scan.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import json
import re
import sys

from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout

DEFAULT_NAMES = (
    "cmake", "ninja", "make", "gmake",
    "cc1", "cc1plus", "collect2", "ld", "ld.*",
    "cicc", "ptxas", "nvcc", "nvlink", "fatbinary", "cudafe++",
)

# The kernel keeps TASK_COMM_LEN - 1 = 15 bytes of the executable's name in comm.
COMM_MAX = 15
_GLOB_CHARS = frozenset("*?[")

# Processes no build selection should ever reach: a name or glob matching one of these selects more than
# build tools (``*``, ``s*``, ``python*``) and is refused unless ``allow_broad`` says it is meant.
SYSTEM_NAMES = (
    "init", "systemd", "systemd-journald", "systemd-logind", "systemd-udevd", "sshd", "sshd-session",
    "dbus-daemon", "cron", "agetty", "rsyslogd", "dockerd", "containerd", "containerd-shim", "kubelet",
    "tini", "dumb-init", "sh", "bash", "dash", "zsh", "sudo", "su", "python", "python3", "nvidia-persistenced",
)

# Command lines longer than this are matched on their first PATTERN_TEXT_MAX characters only.
PATTERN_TEXT_MAX = 32768
# Seconds all patterns together may take over all command lines of one scan.
PATTERN_BUDGET = 5.0


def basename(path):
    """Basename of an executable path; ``/proc/<pid>/exe`` adds `` (deleted)`` for a removed file."""
    if path.endswith(" (deleted)"):
        path = path[:-len(" (deleted)")]
    return path.rstrip("/").rsplit("/", 1)[-1]


class NameMatcher:
    """Exact basenames in a set, globs (``ld.*``) as one compiled regex; ``None`` never matches."""

    def __init__(self, names, option="names"):
        self.names = list(names)
        for name in self.names:
            if not isinstance(name, str) or not name.strip():
                raise ValueError("%s: %r is not a process name" % (option, name))
            if "\x00" in name:
                raise ValueError("%s: %r holds a NUL byte, which no process name can" % (option, name))
            if "/" in name:
                raise ValueError("%s: %r holds '/'; give an executable's basename such as ninja or ld.*" % (option, name))
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


def compile_patterns(patterns, option="patterns"):
    """Command-line regexes -> compiled; ValueError naming ``option`` and the ``re`` error. The one validation."""
    compiled = []
    for pattern in patterns or ():
        if not isinstance(pattern, str) or pattern == "":
            raise ValueError("%s: %r is not a regular expression" % (option, pattern))
        try:
            compiled.append(re.compile(pattern))
        except (re.error, OverflowError, RecursionError) as exc:  # x{99999999999} overflows, deep nesting recurses
            raise ValueError("%s: %r is not a valid regular expression: %s" % (option, pattern, exc))
    return compiled


def comm_may_be_cut(comm):
    """A 15-character comm may be the kernel's cut of a longer name: decide by exe or argv[0] instead."""
    return len(comm) == COMM_MAX


def classify_process(comm, match_name, exe_name=None, argv=None, pattern_hit=False):
    """Whether a process is a build process: ``(matched_by, name)`` or ``(None, None)``.

    ``comm`` decides alone when it cannot have been cut (under 15 characters) and matches; otherwise the
    basename of the ``exe`` link (``exe_name``, read only for a possibly cut comm) or of ``argv[0]`` does. A
    cut comm with nothing better to go on once they were read (``argv`` ``[]``: a zombie; no exe) matches when a
    name starts with it. ``argv`` None means "not read yet": only a whole comm can decide then.
    The command line itself is never searched for names; ``pattern_hit`` (a ``patterns`` regex found it)
    selects it as ``pattern`` under its comm.
    """
    cut = comm_may_be_cut(comm)
    if not cut and match_name(comm):
        return "name", comm
    argv0_name = basename(argv[0]) if argv else None
    for candidate in (exe_name if cut else None, argv0_name):
        if candidate and match_name(candidate):
            return "name", candidate
    if cut and argv is not None and not exe_name and not argv0_name and (match_name(comm) or comm in match_name.truncated):
        return "name", comm
    if pattern_hit:
        return "pattern", comm
    return None, None


# An init starts its command (dumb-init's, a container's entrypoint) as it starts: a session leader re-parented to
# pid 1 that began this long after pid 1 was started by something else, a shell that is gone.
LAUNCH_SECONDS = 5


def service_cgroup(cgroup_text):
    """``/proc/<pid>/cgroup`` -> ``"service"`` (a systemd system service: ``x.service``, ``systemd-run``'s
    ``run-u7.service``), ``"login"`` (a login session's ``session-N.scope``) or None (no systemd path, unreadable).
    The unified line (``0::``) or, on a v1 host, the ``name=systemd`` one carries the unit."""
    path = None
    for line in (cgroup_text or "").splitlines():
        fields = line.split(":", 2)
        if len(fields) == 3 and (fields[0] == "0" and fields[1] == "" or fields[1] == "name=systemd"):
            path = fields[2]
            if fields[1] == "name=systemd":
                break
    if not path:
        return None
    parts = [part for part in path.split("/") if part]
    if any(part.startswith("session-") and part.endswith(".scope") for part in parts):
        return "login"
    if any(part.startswith("user@") for part in parts):
        return None  # a user manager's unit: its processes have systemd --user as parent, not pid 1
    if any(part.endswith(".service") for part in parts):
        return "service"
    return None


def is_orphan(proc, init, cgroup=None, clock_ticks=100):
    """Whether a process was left behind by a parent that is gone, not merely a child of pid 1.

    ``proc`` and ``init`` (pid 1 of the namespace, or None when unreadable) carry ``pid``, ``ppid``, ``pgrp``,
    ``session`` and, where read, ``start_ticks``; ``init`` also ``build_tool`` (its name is a build tool's).
    ``cgroup``: :func:`service_cgroup` of the process, where read. A child of pid 1 is *not* an orphan when pid 1
    is itself the build (``make -j`` as a container's command: its jobs are its children); when it leads its own
    process group inside pid 1's session (tini's command); or when it leads its own session and is a systemd
    service (``systemd-run`` too) or init's own command (dumb-init's), started with pid 1. A session leader in a
    login session's scope, or started long after pid 1, was ``setsid``'d by a shell that is gone: an orphan.
    Anything else re-parented to pid 1 lost its parent: a job of a login session that ended, a compiler whose make
    was killed.
    """
    if proc["pid"] == 1 or proc["ppid"] != 1:
        return False
    if init is not None and init.get("build_tool"):
        return False
    if proc.get("session") == proc["pid"]:
        return _setsid_orphan(proc, init, cgroup, clock_ticks)
    if init is not None and proc.get("session") == init.get("session") and proc.get("pgrp") == proc["pid"]:
        return False
    return True


def _setsid_orphan(proc, init, cgroup, clock_ticks):
    """A session leader whose parent is pid 1: an orphan only on evidence (see :func:`is_orphan`)."""
    if cgroup == "service":
        return False
    if cgroup == "login":
        return True
    started, init_started = proc.get("start_ticks"), (init or {}).get("start_ticks")
    if started is None or init_started is None:
        return False  # no evidence either way: a daemon's command is never reaped on a guess
    return started - init_started > LAUNCH_SECONDS * clock_ticks


def broad_names(names):
    """The names (exact or glob) that would also select system processes (``*``, ``sshd``, ``python*``)."""
    broad = []
    for name in names:
        matcher = NameMatcher([name])
        hits = [system for system in SYSTEM_NAMES if matcher(system)]
        if hits:
            broad.append((name, hits))
    return broad


def non_build_selected(processes, build_names):
    """Processes selected by a pattern whose executable name is not a build tool's (``build_names``)."""
    matcher = NameMatcher(build_names) if build_names else (lambda name: False)
    chosen = []
    for proc in processes:
        if proc.get("matched_by") != "pattern":
            continue
        argv0 = basename((proc.get("cmdline") or "").split(" ", 1)[0]) if proc.get("cmdline") else None
        if not (matcher(proc.get("comm")) or matcher(argv0)):
            chosen.append(proc)
    return chosen


def refuse_broad(names, processes, build_names, names_option="names", patterns_option="patterns"):
    """None, or the message refusing to reap a selection that reaches beyond build tools."""
    broad = broad_names(names)
    if broad:
        return "%s: %s would also select %s, which are not build tools; set allow_broad: true if that is meant" % (
            names_option, ", ".join(repr(name) for name, _hits in broad),
            ", ".join(sorted(set(hit for _name, hits in broad for hit in hits))))
    others = non_build_selected(processes, build_names)
    if others:
        listed = ", ".join("%s (pid %s)" % (proc.get("comm"), proc.get("pid")) for proc in others[:8])
        more = " and %d more" % (len(others) - 8) if len(others) > 8 else ""
        return ("%s: selects processes that are not build tools: %s%s; set allow_broad: true to reap them anyway, or "
                "add their names to names/extra_names" % (patterns_option, listed, more))
    return None


# ---- I/O below: the regexes run in a worker that can be stopped ------------------------------------------

_WORKER = r"""
import json, re, sys
job = json.load(sys.stdin)
lines = job["lines"]
for index, pattern in enumerate(job["patterns"]):
    sys.stdout.write("P %d\n" % index)
    sys.stdout.flush()
    regex = re.compile(pattern)
    hits = [str(number) for number, line in enumerate(lines) if regex.search(line)]
    sys.stdout.write("M %d %s\n" % (index, ",".join(hits)))
    sys.stdout.flush()
"""


def parse_worker_output(text, count):
    """Worker output -> ``(hits, stuck)``: the set of line numbers any pattern found, and the index of the pattern
    that started but never finished (None when all finished)."""
    hits, started, finished = set(), None, set()
    for line in text.splitlines():
        kind, _sep, rest = line.partition(" ")
        if kind == "P":
            started = int(rest)
        elif kind == "M":
            index, _sep, numbers = rest.partition(" ")
            finished.add(int(index))
            hits.update(int(number) for number in numbers.split(",") if number)
    stuck = started if started is not None and started not in finished else None
    if stuck is None and len(finished) < count:
        stuck = len(finished)
    return hits, stuck


def search_patterns(regexes, lines, option="patterns", budget=PATTERN_BUDGET, run=run_with_timeout):
    """Line numbers of ``lines`` (command lines) that any of ``regexes`` finds, within ``budget`` seconds.

    The regexes run in a child Python that is killed when the budget is spent: ``re`` cannot be interrupted,
    and a catastrophic pattern (``(a+)+$`` against a long argument) would otherwise hang the scan for ever.
    ValueError naming ``option`` and the pattern when it did not finish. Lines are cut to PATTERN_TEXT_MAX.
    """
    if not regexes or not lines:
        return set()
    patterns = [regex.pattern if hasattr(regex, "pattern") else regex for regex in regexes]
    job = json.dumps({"patterns": patterns, "lines": [line[:PATTERN_TEXT_MAX] for line in lines]})
    rc, out, err = run([sys.executable, "-I", "-S", "-c", _WORKER], budget, data=job)
    hits, stuck = parse_worker_output(out, len(patterns))
    if rc is None or stuck is not None:
        culprit = patterns[stuck] if stuck is not None and stuck < len(patterns) else ", ".join(patterns)
        longest = max(len(line) for line in lines)
        raise ValueError("%s: %r did not finish matching %d command lines (the longest %d characters) within %ss: a "
                         "regular expression with nested repetition such as (a+)+ backtracks without end; simplify it"
                         % (option, culprit, len(lines), min(longest, PATTERN_TEXT_MAX), budget))
    if rc != 0:
        raise ValueError("%s: the pattern matcher failed: %s" % (option, (err or out).strip()[-300:]))
    return hits
