# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's memory cgroups (v1 or v2): one per fleet run, one per node; emptied and removed bottom-up, and those
of fleets whose owner died reaped at the next start."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import shutil
import signal
import tempfile
import time

from fleet_base import RUN_ID_RE, FleetError, kill_quietly, pid_alive, processes_mentioning, read_text, write_text


class MemoryCgroups:
    """Where memory cgroups live for this process: v1 (memory controller hierarchy) or v2."""

    def __init__(self, version, base_dir):
        self.version = version
        self.base_dir = base_dir

    @property
    def limit_file(self):
        return "memory.limit_in_bytes" if self.version == 1 else "memory.max"

    @property
    def unlimited(self):
        return "-1" if self.version == 1 else "max"

    @classmethod
    def detect(cls, proc_self_cgroup="/proc/self/cgroup", root="/sys/fs/cgroup"):
        with open(proc_self_cgroup) as handle:
            lines = handle.read().splitlines()
        v2_path = None
        for line in lines:
            hierarchy, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):
                return cls(1, os.path.join(root, "memory") + path.rstrip("/"))
            if hierarchy == "0" and controllers == "":
                v2_path = path
        controllers_file = os.path.join(root, "cgroup.controllers")
        if v2_path is not None and os.path.exists(controllers_file):
            with open(controllers_file) as handle:
                if "memory" in handle.read().split():
                    return cls(2, root + v2_path.rstrip("/"))
        raise FleetError("no memory cgroup controller found (neither v1 %s/memory nor v2 %s with memory in cgroup.controllers)"
                         % (root, root))

    def make_run_dir(self, run_id):
        """Create the fleet's cgroup (v2: with memory delegated to the node cgroups); its path."""
        if self.version == 1:
            run_dir = os.path.join(self.base_dir, run_id)
            os.mkdir(run_dir)
            return run_dir
        # v2: the no-internal-processes rule forbids enabling memory below a cgroup that
        # holds processes (ours), so when our own cgroup cannot delegate, try its parent.
        problems = []
        for base in (self.base_dir, os.path.dirname(self.base_dir)):
            run_dir = os.path.join(base, run_id)
            try:
                os.mkdir(run_dir)
                if "memory" not in read_text(os.path.join(run_dir, "cgroup.controllers")).split():
                    write_text(os.path.join(base, "cgroup.subtree_control"), "+memory")
                write_text(os.path.join(run_dir, "cgroup.subtree_control"), "+memory")
                self.base_dir = base
                return run_dir
            except (IOError, OSError) as exc:
                problems.append("%s: %s" % (base, exc))
                if os.path.isdir(run_dir):
                    os.rmdir(run_dir)
        raise FleetError("cgroup v2: cannot delegate the memory controller to a fleet cgroup (%s); run the tests "
                         "from a cgroup whose parent enables memory in cgroup.subtree_control" % "; ".join(problems))

    def stale_search_dirs(self):
        return [self.base_dir] if self.version == 1 else [self.base_dir, os.path.dirname(self.base_dir)]


def cgroup_pids(cgroup_dir):
    """Every pid in a cgroup (cgroup.procs and, on v1, tasks); [] when the cgroup is gone."""
    pids = set()
    for name in ("cgroup.procs", "tasks"):
        try:
            pids.update(int(p) for p in read_text(os.path.join(cgroup_dir, name)).split())
        except (IOError, OSError):
            pass
    return sorted(pids)


def empty_cgroup(cgroup_dir, timeout=10.0):
    """Kill everything in a cgroup and wait until it is empty."""
    deadline = time.monotonic() + timeout
    while True:
        pids = cgroup_pids(cgroup_dir)
        if not pids:
            return
        if time.monotonic() > deadline:
            raise FleetError("cgroup %s still holds pids %s after %.0fs" % (cgroup_dir, pids, timeout))
        for pid in pids:
            kill_quietly(pid, signal.SIGKILL)
        time.sleep(0.02)


def remove_cgroup_tree(top, timeout=10.0):
    """Empty and rmdir a cgroup and everything below it, bottom-up."""
    if not os.path.isdir(top):
        return
    for dirpath, dirnames, _files in os.walk(top, topdown=False):
        del dirnames
        empty_cgroup(dirpath, timeout)
        deadline = time.monotonic() + timeout
        while True:
            try:
                os.rmdir(dirpath)
                break
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    break
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise FleetError("cannot remove cgroup %s: %s" % (dirpath, exc))
                empty_cgroup(dirpath, timeout)
                time.sleep(0.02)


def reap_stale_fleets(cgroups, tmp_root=None):
    """Remove cgroups and dirs left by fleets whose owning process died without teardown."""
    tmp_root = tmp_root or tempfile.gettempdir()
    reaped = []
    cgroup_bases = cgroups.stale_search_dirs()
    for base in cgroup_bases + [tmp_root]:
        try:
            entries = os.listdir(base)
        except OSError:
            continue
        for entry in entries:
            match = RUN_ID_RE.match(entry)
            if not match or pid_alive(int(match.group(1))):
                continue
            path = os.path.join(base, entry)
            if base in cgroup_bases:
                remove_cgroup_tree(path)
            else:
                for pid, _cmd in processes_mentioning(path):
                    kill_quietly(pid)
                shutil.rmtree(path, ignore_errors=True)
            reaped.append(path)
    return reaped
