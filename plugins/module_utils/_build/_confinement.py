# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the guarded build runs, so that an OOM ends the build and never the node: four strategies.

- ``systemd``: a transient scope (``systemd-run --scope -p MemoryMax=...``), where PID 1 is systemd.
- ``cgroupfs``: a child memory cgroup made through cgroupfs (v1; v2 where the parent may have children
  with a memory controller: it holds no processes of its own, or is the root).
- ``watchdog``: no cgroup can be made (read-only cgroupfs, no root): the memory that limits the node is
  watched, and the build's OWN session (its whole tree) is SIGKILLed when the headroom falls below a floor.
- ``none``: nothing; OOM detection then rests on exit status 137 and the kernel log.

Every strategy starts the build the same way (``_build_process``): in its own session, under a small holder
that runs the command, reports its exit status on a pipe and waits to be released. The holder keeps a systemd
scope alive until its ``memory.events`` / ``memory.peak`` are read (a scope with ``--collect`` vanishes with its
last process), and when the module dies (its stdin, the release pipe, closes) it ends the whole build - under
every strategy the build dies with its module, so no build runs on unguarded.
A cgroup's name carries its owner (module pid and start time): another run removes it only once that owner is
provably gone. Nothing here moves or signals a process the module did not start.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import os
import re
import signal
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import process_start_time
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._cgroupfs import locate_controller, read_text
from ansible_collections.gpufleet.preflight.plugins.module_utils._constants import GUARDED_BUILD_CGROUP_PREFIX
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._memory import parse_oom_kill_count

CGROUP_PREFIX = GUARDED_BUILD_CGROUP_PREFIX  # declared in _constants: the recent_oom check reads it without this file
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
_OWNER = re.compile(r"^(?P<base>.+)-p(?P<pid>[0-9]+)-s(?P<start>[0-9]+)$")


class Unavailable(Exception):
    """A strategy cannot run on this node; the message says why."""


# ---------------------------------------------------------------- pure

def cgroup_name(name, build_dir):
    """``gpufleet-build-<name>-<8 hex of the build dir>``: the base of the build directory's cgroups (or scopes);
    each run's own name adds its owner (:func:`owned_name`)."""
    digest = hashlib.sha256(os.path.abspath(build_dir).encode("utf-8")).hexdigest()[:8]
    return "%s%s-%s" % (CGROUP_PREFIX, _SAFE_NAME.sub("_", name)[:40], digest)


def owned_name(base, pid, start_time):
    """``<base>-p<module pid>-s<its start time>``: a cgroup name that says which run made it, so that another run
    removes it only once that run's module is provably gone (a pid alone may be reused; with its start time, not)."""
    return "%s-p%d-s%d" % (base, pid, start_time)


def parse_owner(name):
    """``(base, pid, start_time)`` of an :func:`owned_name`, or None for a name without an owner."""
    match = _OWNER.match(name)
    return (match.group("base"), int(match.group("pid")), int(match.group("start"))) if match else None


def parse_systemd_version(text):
    """``systemd 252 (252.22-1~deb12u1)`` -> 252, or None."""
    match = re.match(r"\s*systemd (\d+)", text or "")
    return int(match.group(1)) if match else None


def systemd_run_argv(systemd_run, unit, limit_bytes, version):
    """The ``systemd-run`` prefix for a scope capped at ``limit_bytes`` without swap. ``OOMPolicy=continue``
    (scopes know it from systemd 253) keeps systemd from stopping the scope at the first OOM kill."""
    argv = [systemd_run, "--scope", "--quiet", "--collect", "--unit", unit + ".scope",
            "-p", "MemoryMax=%d" % limit_bytes, "-p", "MemorySwapMax=0"]
    if version is not None and version >= 253:
        argv += ["-p", "OOMPolicy=continue"]
    return argv + ["--"]


def v2_parent_problem(has_memory_in_subtree, own_procs, is_mount_root):
    """Why a v2 cgroup cannot be the parent of the build's cgroup, or None. The no-internal-process rule:
    a non-root cgroup holding processes cannot give children a memory controller, and making it able to
    would mean moving those processes, which are not ours."""
    if has_memory_in_subtree:
        return None
    if own_procs and not is_mount_root:
        return "it holds processes of its own (cgroup v2 gives such a cgroup's children no memory controller)"
    return None


# ---------------------------------------------------------------- I/O: a cgroup directory

class CgroupDir(object):
    """Counters and cleanup of the build's cgroup, made by us (cgroupfs) or by systemd (a scope)."""

    def __init__(self, directory, version, mountpoint):
        self.dir = directory
        self.version = version
        self.path = "/" + os.path.relpath(directory, mountpoint).lstrip(".").lstrip("/")

    def _read(self, name):
        return read_text(os.path.join(self.dir, name))[0]

    def _int(self, name):
        try:
            return int(self._read(name))
        except (TypeError, ValueError):
            return None

    def usage(self):
        return self._int("memory.usage_in_bytes" if self.version == 1 else "memory.current")

    def peak(self):
        """None before kernel 5.19 on v2 (no ``memory.peak``): the sampled usage stands in."""
        return self._int("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")

    def oom_kills(self):
        return parse_oom_kill_count(self._read("memory.oom_control" if self.version == 1 else "memory.events"))

    def pids(self):
        return [int(line) for line in (self._read("cgroup.procs") or "").split() if line.isdigit()]

    def kill_all(self, wait=15.0):
        """SIGKILL everything in the cgroup (all of it started by this build) until it is empty."""
        killed = []
        deadline = time.time() + wait
        while time.time() < deadline:
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    if pid not in killed:
                        killed.append(pid)
                except OSError:
                    pass
            time.sleep(0.05)
        return killed

    def remove(self, wait=15.0):
        """rmdir once empty (dying tasks take a moment); an error text or None."""
        deadline = time.time() + wait
        while True:
            try:
                os.rmdir(self.dir)
                return None
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    return None
                if time.time() > deadline:
                    return "%s: %s" % (self.dir, exc.strerror)
                if self.pids():
                    self.kill_all(wait=1.0)
                time.sleep(0.05)

    def describe(self):
        return {"version": self.version, "dir": self.dir, "path": self.path}


# ---------------------------------------------------------------- strategies

class Confinement(object):
    """The base: ``prepare`` (Unavailable when it cannot run), ``prefix`` (argv before the holder) and ``preexec``
    (run in the child) per attempt, ``started`` once the holder runs, ``guard`` and ``sample`` on every poll,
    ``counters`` after the build, ``stop`` to end it, ``cleanup`` in every path, ``describe`` for the result."""

    # the registry (``_build_methods.METHODS``) reads these: the method's option value, seconds between two
    # looks while the build runs (None: the status interval), its place in ``auto`` (None: never chosen by auto)
    name = "none"
    poll_seconds = None
    auto_rank = None
    cgroup = None
    prefix_argv = None

    def __init__(self, unit, limit_bytes, floor_bytes, root="/", find=None, run=None, owner=None):
        """``unit``: the build directory's base name (:func:`cgroup_name`); ``owner``: ``(module pid, start
        time)`` of this run, which names its cgroup; ``find(name)``/``run(argv, timeout)`` for methods that call
        tools."""
        self.unit = unit
        self.limit_bytes = limit_bytes
        self.floor_bytes = floor_bytes
        self.root = root
        self.find = find
        self.run = run
        self.owner = owner or (os.getpid(), process_start_time(os.getpid()) or 0)
        self.notes = []

    def prepare(self):
        pass

    def prefix(self):
        return []

    def preexec(self):
        return None

    def started(self, pid):
        pass

    def guard(self, pgid):
        """None, or why the build's session was stopped (the watchdog)."""
        return None

    def sample(self):
        return self.cgroup.usage() if self.cgroup else None

    def counters(self):
        """``(oom_kills or None, peak bytes or None)`` of the attempt just ended."""
        if not self.cgroup:
            return None, None
        return self.cgroup.oom_kills(), self.cgroup.peak()

    def stop(self):
        if self.cgroup:
            self.cgroup.kill_all()

    def cleanup(self):
        """Remove what this attempt made; an error text or None."""
        return None

    def describe(self):
        return {"strategy": self.name, "cgroup": self.cgroup.describe() if self.cgroup else None}


def remove_stale_cgroups(parent, version, mountpoint, base, root="/"):
    """Our cgroups under ``parent`` whose owner (pid and start time in the name) is provably gone: those of the
    build directory ``base`` are emptied (their processes are a dead run's build) and removed; other builds' are
    removed only when empty (rmdir), and whatever runs there is never touched. A cgroup whose owner lives, or whose
    name names no owner, is never removed from under it. Returns notes."""
    notes = []
    try:
        names = os.listdir(parent)
    except OSError:
        return notes
    for name in sorted(names):
        owner = parse_owner(name) if name.startswith(CGROUP_PREFIX) else None
        if owner is None or process_start_time(owner[1], os.path.join(root, "proc")) == owner[2]:
            continue
        stale = CgroupDir(os.path.join(parent, name), version, mountpoint)
        if owner[0] == base:
            killed = stale.kill_all()
            if killed:
                notes.append("killed %d leftover process(es) of a dead run in %s" % (len(killed), stale.dir))
            if stale.remove() is None:
                notes.append("removed the stale cgroup %s" % stale.dir)
            continue
        try:
            os.rmdir(stale.dir)
            notes.append("removed the stale cgroup %s" % stale.dir)
        except OSError:
            pass
    return notes


class CgroupfsConfinement(Confinement):
    """A child memory cgroup, made and removed by us through cgroupfs; its name carries its owner."""

    name = "cgroupfs"
    auto_rank = 2

    def __init__(self, unit, limit_bytes, floor_bytes, root="/", find=None, run=None, owner=None):
        super(CgroupfsConfinement, self).__init__(unit, limit_bytes, floor_bytes, root, find, run, owner)
        self.base = unit
        self.unit = owned_name(unit, self.owner[0], self.owner[1])

    def prepare(self):
        where = locate_controller("memory", root=self.root)
        if where["dir"] is None:
            raise Unavailable("; ".join(where["errors"]))
        self.version, self.mountpoint = where["version"], where["mountpoint"]
        self.parent = where["dir"]
        if self.version == 2:
            self.parent = self._v2_parent(where["dir"])
        if not os.access(self.parent, os.W_OK):
            raise Unavailable("cannot write to %s (read-only cgroupfs, or not root)" % self.parent)
        self.notes.extend(self._remove_stale())
        self._create()
        self.cleanup()  # made and removed once: the strategy works here; each attempt makes it afresh

    def _v2_parent(self, own):
        """Our own cgroup when it may have memory-controlled children; else its parent when that is a leaf-free,
        writable (delegated) cgroup, where the build's cgroup becomes a sibling of ours."""
        problems = []
        for candidate in (own, os.path.dirname(own)) if own != self.mountpoint else (own,):
            subtree = (read_text(os.path.join(candidate, "cgroup.subtree_control"))[0] or "").split()
            procs = (read_text(os.path.join(candidate, "cgroup.procs"))[0] or "").split()
            problem = v2_parent_problem("memory" in subtree, procs, candidate == self.mountpoint)
            if problem is None and "memory" not in subtree:
                try:
                    with open(os.path.join(candidate, "cgroup.subtree_control"), "w") as handle:
                        handle.write("+memory")
                except (IOError, OSError) as exc:
                    problem = "cannot enable its memory controller for children: %s" % (exc.strerror or exc)
            if problem is None:
                return candidate
            problems.append("%s: %s" % (candidate, problem))
        raise Unavailable("; ".join(problems) + "; processes the module did not start are never moved")

    def _remove_stale(self):
        return remove_stale_cgroups(self.parent, self.version, self.mountpoint, self.base, self.root)

    def _create(self):
        cgroup = CgroupDir(os.path.join(self.parent, self.unit), self.version, self.mountpoint)
        try:
            os.mkdir(cgroup.dir)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise Unavailable("cannot create %s: %s" % (cgroup.dir, exc.strerror or exc))
        self.cgroup = cgroup
        writes = [("memory.limit_in_bytes", self.limit_bytes), ("memory.memsw.limit_in_bytes", self.limit_bytes)] \
            if self.version == 1 else [("memory.max", self.limit_bytes), ("memory.swap.max", 0)]
        for index, (name, value) in enumerate(writes):
            path = os.path.join(cgroup.dir, name)
            if index and not os.path.exists(path):
                continue  # no swap accounting on this kernel
            try:
                with open(path, "w") as handle:
                    handle.write(str(value))
            except (IOError, OSError) as exc:
                self.cleanup()
                raise Unavailable("cannot set %s: %s" % (path, exc.strerror or exc))

    def preexec(self):
        self._create()
        procs = os.path.join(self.cgroup.dir, "cgroup.procs")

        def join():  # in the forked child, before exec: only the build's own process joins
            with open(procs, "w") as handle:
                handle.write(str(os.getpid()))
        return join

    def cleanup(self):
        if not self.cgroup:
            return None
        self.cgroup.kill_all()
        error = self.cgroup.remove()
        self.cgroup = None if error is None else self.cgroup
        return error

    def describe(self):
        made = self.cgroup or CgroupDir(os.path.join(self.parent, self.unit), self.version, self.mountpoint)
        return {"strategy": self.name, "cgroup": made.describe()}


class SystemdConfinement(Confinement):
    """A transient scope per attempt: ``systemd-run --scope`` registers it and execs the holder inside."""

    name = "systemd"
    auto_rank = 1

    def __init__(self, unit, limit_bytes, floor_bytes, root="/", find=None, run=None, owner=None):
        super(SystemdConfinement, self).__init__(unit, limit_bytes, floor_bytes, root, find, run, owner)
        self.version = None
        self.attempts = 0
        self.scope = None
        self.last_cgroup = None

    def prepare(self):
        if not os.path.isdir(os.path.join(self.root, "run/systemd/system")):
            raise Unavailable("PID 1 is not systemd (no /run/systemd/system)")
        if os.geteuid() != 0:
            raise Unavailable("transient system scopes need root")
        self.systemd_run = self.find("systemd-run")
        if not self.systemd_run:
            raise Unavailable("systemd-run was not found")
        rc, out, err = self.run([self.systemd_run, "--version"], 30)
        self.version = parse_systemd_version(out)
        if rc != 0:
            raise Unavailable("%s --version: %s" % (self.systemd_run, "timed out" if rc is None else err.strip()))
        if self.version is None or self.version < 253:
            self.notes.append("systemd %s: scopes have no OOMPolicy=continue; the holder outlives systemd's stop"
                              % self.version)

    def prefix(self):
        # a unit per attempt and run: the last attempt's scope may still be stopping under its name
        self.attempts += 1
        self.scope = "%s-%d-%d" % (owned_name(self.unit, self.owner[0], self.owner[1]), self.attempts, int(time.time()))
        self.prefix_argv = systemd_run_argv(self.systemd_run, self.scope, self.limit_bytes, self.version)
        return self.prefix_argv

    def started(self, pid):
        """The scope's cgroup, from the holder's ``/proc/<pid>/cgroup`` (systemd-run moved it before exec)."""
        where = locate_controller("memory", root=self.root, pid=pid)
        if where["dir"] is None or not where["dir"].rstrip("/").endswith(self.scope + ".scope"):
            self.notes.append("the scope's cgroup was not found for pid %d: %s" % (
                pid, "; ".join(where["errors"]) or where["dir"]))
            return
        self.cgroup = CgroupDir(where["dir"], where["version"], where["mountpoint"])

    def cleanup(self):
        # --collect: the scope goes with its last process, which the caller has just released or killed;
        # what it was stays describable for the result
        self.last_cgroup, self.cgroup = self.cgroup or self.last_cgroup, None
        return None

    def describe(self):
        cgroup = self.cgroup or self.last_cgroup
        return {"strategy": self.name, "cgroup": cgroup.describe() if cgroup else None,
                "unit": (self.scope or self.unit) + ".scope", "systemd_version": self.version}
