# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watchdog confinement: where no cgroup can be made (read-only cgroupfs as Docker and Kubernetes
mount it, no systemd, no root), watch the memory that limits the node - the tightest ``memory.max`` /
``memory.limit_in_bytes`` over our own cgroup and its ancestors, minus its usage less reclaimable page
cache, else ``MemAvailable`` - and SIGKILL the build's own session (its whole tree) when it falls below a floor
(the planner's reserve), before the kernel's OOM killer picks a victim of its choosing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import kill_session
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._cgroupfs import ancestors, locate_controller, read_text, tightest
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._confinement import Confinement, Unavailable
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human

NO_LIMIT = 1 << 60  # v1 prints "no limit" as a page-rounded 2^63 - 1
# seconds between two looks at the headroom: a compiler grows by at most a few hundred MiB in that time
POLL_SECONDS = 0.05


def parse_limit(text):
    """v1 ``memory.limit_in_bytes`` / v2 ``memory.max`` text -> bytes, None for no limit."""
    text = (text or "").strip()
    if not text or text == "max":
        return None
    value = int(text)
    return None if value >= NO_LIMIT else value


def parse_stat_value(text, key):
    """``memory.stat`` text -> the value of ``key``, or None."""
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            return int(parts[1])
    return None


def headroom(limit, usage, inactive_file):
    """Bytes left before ``limit``: the page cache the kernel would reclaim first does not count as used."""
    return limit - max(0, usage - (inactive_file or 0))


class WatchdogConfinement(Confinement):
    """No cgroup of its own: watch the memory that limits the node and stop the build's own session
    before the kernel's OOM killer picks a victim (sshd, the container's init, someone's notebook)."""

    name = "watchdog"
    poll_seconds = POLL_SECONDS
    auto_rank = 3

    def prepare(self):
        self.watched = self._tightest_limit()
        if self.watched is None:
            self.watched = {"source": os.path.join(self.root, "proc/meminfo")}
            if self._meminfo_available() is None:
                raise Unavailable("neither a memory cgroup limit nor MemAvailable can be read")
        # the watchdog must get the CPU the build wants: the module runs 10 nice levels above the build (root)
        self.niceness = os.getpriority(os.PRIO_PROCESS, 0)
        try:
            os.setpriority(os.PRIO_PROCESS, 0, max(-20, self.niceness - 10))
        except OSError as exc:
            self.notes.append("the watchdog runs at the build's priority: %s" % (exc.strerror or exc))
        if self.floor_bytes >= self.headroom():
            raise Unavailable("only %s is free in %s, not above the watchdog's floor of %s (reserve)" % (
                human(self.headroom()), self.watched["source"], human(self.floor_bytes)))

    def _tightest_limit(self):
        where = locate_controller("memory", root=self.root)
        if where["dir"] is None:
            return None
        name = "memory.limit_in_bytes" if where["version"] == 1 else "memory.max"
        levels = []
        for directory in ancestors(where["dir"], where["mountpoint"]):
            try:
                levels.append((directory, parse_limit(read_text(os.path.join(directory, name))[0])))
            except ValueError:
                continue
        limit, directory = tightest(levels)  # the one rule: a parent's limit caps every child
        return None if limit is None else {"source": directory, "limit": limit, "version": where["version"]}

    def _meminfo_available(self):
        match = re.search(r"^MemAvailable:\s+(\d+) kB", read_text(os.path.join(self.root, "proc/meminfo"))[0] or "", re.M)
        return int(match.group(1)) * 1024 if match else None

    def headroom(self):
        if "limit" not in self.watched:
            return self._meminfo_available() or 0
        version = self.watched["version"]
        usage_name, inactive_key = ("memory.usage_in_bytes", "total_inactive_file") if version == 1 \
            else ("memory.current", "inactive_file")
        try:
            usage = int(read_text(os.path.join(self.watched["source"], usage_name))[0])
        except (TypeError, ValueError):
            return self.watched["limit"]
        stat = read_text(os.path.join(self.watched["source"], "memory.stat"))[0]
        return headroom(self.watched["limit"], usage, parse_stat_value(stat, inactive_key))

    def sample(self):
        if "limit" not in self.watched:
            return None
        return self.watched["limit"] - self.headroom()

    def guard(self, pgid):
        left = self.headroom()
        if left >= self.floor_bytes:
            return None
        # the build's own session, nothing else; never its holder (the session leader): it stays the guard of what
        # the build left outside the session, should the module die before its own sweep
        if not kill_session(pgid, spare=(pgid,)):
            return None
        return "the watchdog stopped the build: %s left in %s, below the floor of %s" % (
            human(left), self.watched["source"], human(self.floor_bytes))

    def preexec(self):
        niceness = self.niceness

        def build_priority():  # in the forked build: back to the niceness the module was started with
            os.setpriority(os.PRIO_PROCESS, 0, niceness)
        return build_priority

    def cleanup(self, wait=30.0):
        """Before the next attempt: memory back above the floor once the stopped build's pages are freed. When it
        does not come back, what holds it is not the build (nothing of it is left): an error text."""
        deadline = time.time() + wait
        left = self.headroom()
        while left < self.floor_bytes:
            if time.time() > deadline:
                return ("%s: only %s free %.0f s after the build stopped, below the floor of %s: other processes "
                        "hold that memory" % (self.watched["source"], human(left), wait, human(self.floor_bytes)))
            time.sleep(0.1)
            left = self.headroom()
        return None

    def describe(self):
        return {"strategy": self.name, "cgroup": None, "watched": self.watched.get("source"),
                "watched_limit_bytes": self.watched.get("limit"), "floor_bytes": self.floor_bytes,
                "floor_human": human(self.floor_bytes)}
