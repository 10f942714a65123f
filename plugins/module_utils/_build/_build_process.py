# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start the guarded build the same way under every confinement: in its own session (so a stop reaches
its whole tree - ninja puts each step in a process group of its own - and nothing else), under a small
Python holder that reports the build's exit status on a pipe and waits to be released, keeping a systemd
scope readable until its counters are read.

The holder is the build's guard when the module is gone: it is a child subreaper (whatever the build starts and
orphans - ``cmd &``, a ``setsid`` daemon, a compiler-cache server - stays its descendant), and once its stdin
closes (the module released it, or died: SIGKILL, the async limit, the OOM killer) it SIGKILLs every process of
the build - its session, its descendants and any process carrying the run's marker variable - before it exits.
So nothing of a build outlives its attempt, under every confinement.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import select
import signal
import subprocess
import sys
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._admission_settings import digits

# the variable every process of the build inherits: its value names the run (run id, module pid and start time)
MARKER_VARIABLE = "GPUFLEET_BUILD_RUN"
PF_KTHREAD = 0x00200000  # /proc/<pid>/stat flags: a kernel thread

# python holder: argv = report fd, marker, build argv. Its own signals are caught (a handler, unlike an ignored
# signal, is not inherited by the build) so that a systemd stop of the scope leaves it to report the exit status.
HOLDER = r'''
import os, select, signal, subprocess, sys, time
report, marker, argv = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3:]
try:
    import ctypes
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans of the build stay ours
except Exception:
    pass
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
    signal.signal(number, lambda *args: None)
me, session = os.getpid(), os.getsid(0)


def build_pids():
    parents, found = {}, set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            if fields[0] == b"Z":
                continue
            parents[int(name)] = int(fields[1])
            if int(fields[3]) == session:
                found.add(int(name))
            if marker:
                with open("/proc/%s/environ" % name, "rb") as handle:
                    if marker in handle.read().split(b"\0"):
                        found.add(int(name))
        except (OSError, IndexError, ValueError):
            continue
    for pid in parents:
        parent, depth = parents.get(pid), 0
        while parent and depth < 256:
            if parent == me:
                found.add(pid)
                break
            parent, depth = parents.get(parent), depth + 1
    return found


def end_build():
    for dummy in range(50):
        found = build_pids()
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def reap_orphans(keep=None):
    """Reap the build's orphans that ended (reparented here: evicted compiles' nvcc, sh and cicc stayed zombies for the
    whole of the real tree's build); while the build runs, never its own process, whose status Popen must read."""
    if keep is None:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except OSError:
            pass
        return
    for name in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % name, "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            if fields[0] == b"Z" and int(fields[1]) == me and int(name) != keep:
                os.waitpid(int(name), os.WNOHANG)
        except (OSError, IndexError, ValueError):
            continue


def released():
    """True once stdin closed; a line on it is the module's stop request, kept in the pipe if the build had not
    started yet, so a stop never misses a build that starts after it."""
    ready = select.select([0, wake_r], [], [], 5.0)[0]
    if wake_r in ready:
        os.read(wake_r, 512)
    if 0 not in ready:
        return False
    request = os.read(0, 512)
    if request:
        end_build()
    return not request


def tell(line):
    """A report to the module; False when nobody reads it any more (the module died: EPIPE)."""
    try:
        os.write(report, line)
        return True
    except OSError:
        return False


if not tell(b"started\n"):  # the module died while we started: build nothing
    os._exit(137)
try:
    build = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
except OSError as exc:
    os.write(2, ("gpufleet-build: %s: %s\n" % (argv[0], exc.strerror)).encode())
    build = None
while build is not None and build.poll() is None:
    if released():  # the module is gone before the build ended: the build goes with it
        end_build()
        build.wait()
        os._exit(137)
    reap_orphans(keep=build.pid)
rc = 127 if build is None else build.returncode if build.returncode >= 0 else 128 - build.returncode
# the module may be gone by now (the report fails): what the build left is still ended below, never skipped
tell(("exit %d\n" % rc).encode())
while not released():
    reap_orphans()
end_build()
reap_orphans()
os._exit(rc)
'''


def session_of(stat_text):
    """``/proc/<pid>/stat`` text -> the session id (field 6; the command name in parentheses may hold spaces)."""
    return int(stat_text.rsplit(")", 1)[1].split()[3])


def start_time_of(stat_text):
    """``/proc/<pid>/stat`` text -> the start time in clock ticks after boot (field 22): with the pid, a process's
    identity (a pid alone may be reused)."""
    return int(stat_text.rsplit(")", 1)[1].split()[19])


def process_start_time(pid, proc="/proc"):
    """The start time of ``pid`` (see :func:`start_time_of`), None when it does not run (or is a zombie)."""
    try:
        with open(os.path.join(proc, str(int(pid)), "stat")) as handle:
            text = handle.read()
        if text.rsplit(")", 1)[1].split()[0] == "Z":
            return None
        return start_time_of(text)
    except (IOError, OSError, ValueError, IndexError, TypeError):
        return None


def owner_alive(pid, start_time, proc="/proc"):
    """Whether process ``pid`` started at ``start_time`` still runs (a reused pid has another start time)."""
    try:
        return start_time is not None and process_start_time(pid, proc) == int(start_time)
    except (TypeError, ValueError):
        return False


def marker_value(run_id, pid, start_time):
    return "%s=%s:%d:%d" % (MARKER_VARIABLE, run_id, pid, start_time)


def dead_runs_marker(marker, proc="/proc"):
    """Whether ``marker`` (from a status file) is a run's marker whose module no longer runs: only then may what
    carries it be ended. Anything else read from a file - another variable, a live run's marker - is not."""
    if not isinstance(marker, str) or "=" not in marker:
        return False
    name, value = marker.split("=", 1)
    parts = value.rsplit(":", 2)
    pid, start = (digits(part) for part in parts[1:]) if len(parts) == 3 else (None, None)
    if name != MARKER_VARIABLE or not parts[0] or pid is None or start is None:
        return False    # "²" passes str.isdigit() and fails int() (issue 36 finding 4)
    return not owner_alive(pid, start, proc)


def kill_session(sid, proc="/proc", rounds=5, spare=()):
    """SIGKILL every process of session ``sid`` but those in ``spare``: the build's whole tree, also what ninja
    started in process groups of its own. Nothing outside the session the build was started in is signalled.
    Returns the pids killed."""
    spared = set(str(pid) for pid in spare)
    return _kill_matching(lambda name: name not in spared and _session(proc, name) == sid, proc, rounds)


def kill_marked(marker, proc="/proc", rounds=5, settle_seconds=1.0):
    """SIGKILL every process whose environment holds ``marker`` (``VAR=value``): what a dead run's build left
    when its holder was killed with it. Returns the pids killed.

    A process in the middle of an exec shows an empty environment until the kernel has laid out the new image's
    (its parent already saw the exec succeed): such processes are looked at again for up to ``settle_seconds``."""
    wanted = marker.encode("utf-8", "surrogateescape")
    if not marker or "=" not in marker:
        return []
    killed, deadline = set(), time.monotonic() + settle_seconds
    while True:
        unsettled = set()

        def carries_marker(name):
            environ = _environ(proc, name)
            if environ == [b""] and _user_process(proc, name):
                unsettled.add(name)
            return wanted in environ

        killed.update(_kill_matching(carries_marker, proc, rounds))
        if not unsettled or time.monotonic() >= deadline:
            return sorted(killed)
        time.sleep(0.01)


def _session(proc, name):
    try:
        with open(os.path.join(proc, name, "stat")) as handle:
            return session_of(handle.read())
    except (IOError, OSError, ValueError, IndexError):
        return None


def _user_process(proc, name):
    """A live process with a user-space image: not a zombie and not a kernel thread (both show no environment)."""
    try:
        with open(os.path.join(proc, name, "stat")) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return fields[0] not in ("Z", "X") and not int(fields[6]) & PF_KTHREAD
    except (IOError, OSError, ValueError, IndexError):
        return False


def _environ(proc, name):
    try:
        with open(os.path.join(proc, name, "environ"), "rb") as handle:
            return handle.read().split(b"\0")
    except (IOError, OSError):
        return []


def _kill_matching(matches, proc, rounds):
    killed = set()
    me = str(os.getpid())
    for dummy in range(rounds):  # a process may fork while we look: look again until none is left
        found = [int(name) for name in os.listdir(proc) if name.isdigit() and name != me and matches(name)]
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
    until :meth:`release` so the cgroup can still be read. ``marker``: ``VAR=value`` in ``env`` that every
    process of the build carries."""

    def __init__(self, command, confinement, cwd, env, log, marker=""):
        self.rc = None
        self.started = False
        read_end, self._report = os.pipe()
        self._reports = os.fdopen(read_end, "rb", 0)
        join = confinement.preexec()
        # -E -S: the build environment's PYTHONPATH and site-packages are not the holder's (and it starts faster)
        holder = [sys.executable or "/usr/bin/python3", "-E", "-S", "-c", HOLDER, str(self._report), marker]
        try:
            self.process = subprocess.Popen(
                confinement.prefix() + holder + list(command), cwd=cwd, env=env, stdin=subprocess.PIPE,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                pass_fds=(self._report,), preexec_fn=join)
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
        """End the build, never its holder: the holder is the guard of what the build left outside its session
        (``setsid`` daemons, carrying the marker) until the module releases it, or dies. Killing it too left those
        running for good when the module was killed before its own sweep (issue 28 item 10).

        The request on the holder's stdin reaches a build the holder has not started yet (a loaded node starts
        Python slowly); the session kill reaches a build whose holder no longer reads."""
        try:
            self.process.stdin.write(b"stop\n")
            self.process.stdin.flush()
        except (IOError, OSError, ValueError):  # the holder is gone or released: nothing left to ask
            pass
        return kill_session(self.pgid, spare=(self.pgid,))

    def release(self):
        """Let the holder end what is left of the build and exit (closing its stdin), and reap it."""
        try:
            self.process.stdin.close()
        except (IOError, OSError):
            pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a holder that does not end: the whole session, the holder too
            kill_session(self.pgid)
            self.process.wait()
        self._reports.close()
        if self.rc is None:
            self.rc = self.process.returncode
        return self.rc
