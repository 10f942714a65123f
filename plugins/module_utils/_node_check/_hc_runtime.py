# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the node-local health check runs: one deadline for the whole run, one run at a time per node, no child left.

- **One deadline** (``deadline_seconds``, default 50: slurmd kills its HealthCheckProgram's process group at 60 s).
  Every command the collectors run gets at most the time left before the facts' share of it ends; the Slurm calls
  keep their own share (:data:`SLURM_RESERVE_SECONDS`) and run only with time left. :func:`check_fit` is what the
  role (``health_check_bundle``) runs at install: a policy whose timeouts cannot fit is refused there, naming them.
- **One run at a time**: a lock file per node, ``flock`` non-blocking; a live prior run is reported, not doubled.
- **No orphan**: children run in the check's own process group (the group slurmd kills; the check makes itself a
  session leader when started as nobody's group leader, from cron or by hand), each asks the kernel to SIGKILL it
  when the check dies (``PR_SET_PDEATHSIG``: a kill of the check's pid alone takes its direct children), and a
  command's timeout, the check's own deadline or a SIGTERM kills every child with everything below it (by parent
  pid, from /proc). A hung ``nvidia-smi`` never outlives the run.

Pure parts (:func:`check_fit`, :class:`Deadline`) are unit-tested; the rest touches processes and files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import signal
import stat
import subprocess
import threading
import time

SLURMD_KILL_SECONDS = 60
DEFAULT_DEADLINE = 50
# sinfo, sinfo again right before the update, scontrol, sinfo read back: each usually well under a second.
SLURM_CALL_SECONDS = 10
SLURM_RESERVE_SECONDS = 20
# Start-up (the zip's imports), the metrics file, the output.
MARGIN_SECONDS = 3
KILL_GRACE = 2.0
SCHEDULES = ("none", "slurm", "cron", "systemd")


def max_deadline(schedule, interval_minutes=5):
    """The longest run the schedule allows: under slurmd 5 s short of its 60 s kill; from cron or a timer, short
    of the next run."""
    if schedule == "slurm":
        return SLURMD_KILL_SECONDS - 5
    if schedule in ("cron", "systemd"):
        return max(10, int(interval_minutes) * 60 - 10)
    return 600


def check_fit(deadline, gpu_timeout, gathers_gpus, slurm, schedule="none", interval_minutes=5):
    """The deadline, checked against the schedule and the policy's timeouts; ValueError naming what to change."""
    if schedule not in SCHEDULES:
        raise ValueError("schedule: %r is not one of %s" % (schedule, ", ".join(SCHEDULES)))
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not 5 <= deadline <= 600:
        raise ValueError("deadline_seconds: %r must be a number of seconds from 5 to 600" % (deadline,))
    most = max_deadline(schedule, interval_minutes)
    if deadline > most:
        why = ("slurmd kills its HealthCheckProgram at %d s" % SLURMD_KILL_SECONDS if schedule == "slurm"
               else "the next run starts %d min later" % int(interval_minutes))
        raise ValueError("deadline_seconds: %s s does not fit schedule %s (%s): at most %d s"
                         % (deadline, schedule, why, most))
    reserve = (SLURM_RESERVE_SECONDS if slurm else 0) + MARGIN_SECONDS
    if gathers_gpus and gpu_timeout + reserve > deadline:
        raise ValueError("gpu_timeout: %s s cannot fit the health check's %s s deadline (schedule %s) with %d s kept "
                         "for %s: set gpu_timeout to at most %d s%s"
                         % (gpu_timeout, deadline, schedule, reserve, "Slurm's calls and the rest" if slurm else "the rest",
                            max(int(deadline - reserve), 0),
                            "" if deadline >= most else ", or raise deadline_seconds (at most %d s here)" % most))
    return deadline


class Deadline(object):
    """The run's clock: the facts end ``reserve`` seconds before the end, so Slurm always has its share."""

    def __init__(self, seconds, slurm, clock=time.monotonic, reserve=SLURM_RESERVE_SECONDS):
        self.clock = clock
        self.seconds = seconds
        self.started = clock()
        self.end = self.started + seconds - MARGIN_SECONDS
        self.facts_end = self.end - (reserve if slurm else 0)

    def facts_left(self):
        return self.facts_end - self.clock()

    def left(self):
        return self.end - self.clock()

    def elapsed(self):
        return self.clock() - self.started


# ---------------------------------------------------------------- children: tracked, in our group, killed with us

_CHILDREN = set()
_CHILDREN_LOCK = threading.Lock()


def _pdeathsig():
    """A preexec function asking the kernel to SIGKILL the child when the check dies; resolved before any fork
    (no import, no allocation worth the name in the forked child)."""
    try:
        import ctypes  # pylint: disable=import-outside-toplevel
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec():
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the check died before prctl took effect
            os._exit(1)
    return preexec


def become_group_leader():
    """Lead our own process group so a kill of it takes every child: already the leader under slurmd (it does
    setpgrp for us; setsid then fails, which is fine), a new session from cron or a shell's pipeline member."""
    if os.getpgrp() == os.getpid():
        return False
    try:
        os.setsid()
        return True
    except OSError:
        return False


def descendants(pid, proc_root="/proc"):
    """``pid`` and every process below it (by parent pid, read from /proc): a child's own children stay in our
    process group but are not ours to wait on (a hung nvidia-smi wrapper's ``sleep``)."""
    parents = {}
    try:
        names = os.listdir(proc_root)
    except OSError:
        return [pid]
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, name, "stat"), "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
            parents.setdefault(int(text[text.rfind(")") + 2:].split()[1]), []).append(int(name))
        except (IOError, OSError, ValueError, IndexError):
            continue
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(child for child in parents.get(current, ()) if child not in found)
    return found


def kill_tree(pid):
    """SIGKILL ``pid`` and everything below it, the parents first, so nobody below is re-parented and missed."""
    for each in descendants(pid):
        try:
            os.kill(each, signal.SIGKILL)
        except OSError:
            pass


def kill_children():
    """SIGKILL every child the check started that may still run, with its own children (signal handlers call it:
    no lock taken, nothing waited on)."""
    for proc in list(_CHILDREN):
        kill_tree(proc.pid)


def bounded_run(deadline):
    """The ``run(argv, timeout)`` callable for the collectors: at most the facts' time left, children tracked."""
    preexec = _pdeathsig()

    def run(argv, timeout, env=None, cwd=None, data=None):
        limit = min(float(timeout), deadline.facts_left())
        if limit < 0.5:
            return None, "", "%s: not run: the health check's %s s deadline leaves no time for it" % (argv[0], deadline.seconds)
        try:
            proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL if data is None else subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd, close_fds=True,
                                    preexec_fn=preexec)
        except OSError as exc:
            return 127 if exc.errno in (errno.ENOENT, errno.EACCES) else 126, "", "%s: %s" % (argv[0], exc.strerror or exc)
        with _CHILDREN_LOCK:
            _CHILDREN.add(proc)
        try:
            try:
                out, err = proc.communicate(None if data is None else data.encode("utf-8"), timeout=limit)
            except subprocess.TimeoutExpired:
                kill_tree(proc.pid)
                try:
                    out, err = proc.communicate(timeout=KILL_GRACE)
                except subprocess.TimeoutExpired:
                    return None, "", ("%s: timed out after %ss and did not exit after SIGKILL within %ss (pid %s); left "
                                      "behind" % (argv[0], _seconds(limit), KILL_GRACE, proc.pid))
                return None, _text(out), "%s: timed out after %ss and was killed" % (argv[0], _seconds(limit))
            return proc.returncode, _text(out), _text(err)
        finally:
            with _CHILDREN_LOCK:
                _CHILDREN.discard(proc)
    return run


def _seconds(value):
    return int(value) if float(value).is_integer() else round(value, 1)


def _text(data):
    return (data or b"").decode("utf-8", "replace")


def install_stop(deadline, say):
    """At the deadline (SIGALRM) or on SIGTERM/SIGINT/SIGHUP: kill every child, ``say`` one line, exit 2 (unknown).
    Never blocks: no lock taken, no file written (the Slurm record is written before each step, see _slurm)."""
    def stop(signum, _frame):
        kill_children()
        if signum == signal.SIGALRM:
            say("unknown: the health check's %s s deadline passed; its children were killed" % deadline.seconds)
        else:
            say("unknown: stopped by signal %d; its children were killed" % signum)
        os._exit(2)
    for signum in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    signal.setitimer(signal.ITIMER_REAL, max(deadline.seconds - deadline.elapsed() - 1, 0.1))


def stop_alarm():
    """The deadline's alarm off (the run is done, only the output is left)."""
    signal.setitimer(signal.ITIMER_REAL, 0)


# ---------------------------------------------------------------- one run at a time


def lock_path(state_dir, node):
    return os.path.join(state_dir, "health-check-%s.lock" % "".join(c if c.isalnum() or c in "._-" else "_" for c in node))


def take_lock(path):
    """``(fd, None)`` with the lock held for the run, or ``(None, why)``: a live prior run (its pid and age), or a
    lock file that cannot be used. Never blocks (a FIFO or symlink planted there is refused)."""
    directory = os.path.dirname(path)
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        return None, "lock %s: %s" % (path, exc.strerror or exc)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None, "lock %s is not a plain file: remove it" % path
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _holder(fd)
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return None, "a previous run is still running (%s): this run did nothing" % holder
        return None, "lock %s: %s" % (path, exc.strerror or exc)
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps(dict(pid=os.getpid(), started=time.time())).encode("utf-8"))
    return fd, None


def _holder(fd):
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
        return "pid %d, started %.0f s ago" % (int(data["pid"]), time.time() - float(data["started"]))
    except (OSError, ValueError, KeyError, TypeError, OverflowError):   # {"pid": 1e999}: int(inf) overflows
        return "pid unknown"
