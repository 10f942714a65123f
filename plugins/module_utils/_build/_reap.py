# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reaping build processes safely: SIGTERM, a grace period, SIGKILL, and nothing it was not asked to touch.

Before every signal the pid must still be the same process (same start time), because pids are reused;
pid 1, the module and its ancestors are never signalled; a process in another PID namespace (a container
seen from its host) is left alone unless asked. The selection comes from ``_processes``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import signal
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._processes import read_stat
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import seconds

# The longest grace reaping waits between SIGTERM and SIGKILL: an hour is already far more than a compiler needs.
MAX_GRACE = 3600.0
# Reaping a process whose /proc/<pid>/ns/pid differs from ours would reach into a container.
OTHER_NAMESPACE = "in another PID namespace (a container): not signalled; set allow_broad: true to reach into it"


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


def _wait_gone(handles, wait_seconds, clock, sleep, poll=0.05):
    """Poll until every handle is gone or ``seconds`` passed; returns those still alive."""
    deadline = clock() + wait_seconds
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
