# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start the guarded build the same way under every confinement: in its own session (so a stop reaches
its whole tree - ninja puts each step in a process group of its own - and nothing else), under a small
``sh`` holder that reports the build's exit status on a pipe and waits to be released, keeping a systemd
scope readable until its counters are read.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import select
import signal
import subprocess

# sh holder: $1.. is the build. Trapping TERM keeps it alive for the exit status when systemd's OOMPolicy=stop
# (older systemd: scopes have no OOMPolicy) terminates the scope's processes; a handler, unlike an ignored
# signal, is not inherited by the build.
HOLDER = ('trap : TERM INT HUP; echo started >&{rc}; "$@" </dev/null {rc}>&-; rc=$?; echo "exit $rc" >&{rc}; '
          'read dummy; exit "$rc"')


def session_of(stat_text):
    """``/proc/<pid>/stat`` text -> the session id (field 6; the command name in parentheses may hold spaces)."""
    return int(stat_text.rsplit(")", 1)[1].split()[3])


def kill_session(sid, proc="/proc", rounds=5):
    """SIGKILL every process of session ``sid``: the build's whole tree, also what ninja started in process groups
    of its own. Nothing outside the session the build was started in is signalled. Returns the pids killed."""
    killed = set()
    for dummy in range(rounds):  # a process may fork while we look: look again until none is left
        found = []
        for name in os.listdir(proc):
            if not name.isdigit():
                continue
            try:
                with open(os.path.join(proc, name, "stat")) as handle:
                    if session_of(handle.read()) == sid:
                        found.append(int(name))
            except (IOError, OSError, ValueError, IndexError):
                continue
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        if not found:
            break
    return sorted(killed)


class BuildProcess(object):
    """The holder running the build in its own session; ``rc`` once the build ended, the holder kept alive
    until :meth:`release` so the cgroup can still be read."""

    def __init__(self, command, confinement, cwd, env, log, keep_fds=()):
        self.rc = None
        self.started = False
        read_end, self._report = os.pipe()
        self._reports = os.fdopen(read_end, "rb", 0)
        # dash names single-digit descriptors only: the report pipe moves to a free one of 3-9 in the child
        fd = min(set(range(3, 10)) - set(keep_fds))
        join = confinement.preexec()
        report = self._report

        def preexec():
            os.dup2(report, fd)
            if join:
                join()
        holder = ["/bin/sh", "-c", HOLDER.format(rc=fd), "gpufleet-build"]
        try:
            self.process = subprocess.Popen(
                confinement.prefix() + holder + list(command), cwd=cwd, env=env, stdin=subprocess.PIPE,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                pass_fds=tuple(keep_fds) + (fd,), preexec_fn=preexec)
        finally:
            os.close(self._report)
        self.pgid = self.process.pid
        self._buffer = b""

    def wait(self, seconds):
        """Wait up to ``seconds`` for the holder's reports; True once the build has ended."""
        if self.rc is not None:
            return True
        ready = select.select([self._reports], [], [], max(0.0, seconds))[0]
        if ready:
            chunk = self._reports.read(256)
            if not chunk:  # the holder died (killed with its group): its own status is the build's
                self.rc = self.process.wait()
                return True
            self._buffer += chunk
            lines = self._buffer.split(b"\n")
            self._buffer = lines.pop()
            for line in lines:
                if line == b"started":
                    self.started = True
                elif line.startswith(b"exit "):
                    self.rc = int(line.split()[1])
        return self.rc is not None

    def kill(self):
        kill_session(self.pgid)

    def release(self):
        """Let the holder exit (closing its stdin) and reap it."""
        try:
            self.process.stdin.close()
        except (IOError, OSError):
            pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
            self.process.wait()
        self._reports.close()
        if self.rc is None:
            self.rc = self.process.returncode
        return self.rc
