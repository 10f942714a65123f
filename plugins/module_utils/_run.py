# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a command with a hard timeout, and find executables the way a node's operator would.

``run_with_timeout`` is the ``run`` callable every collector takes: ``(argv, timeout) -> (rc, stdout, stderr)``.
``rc`` is ``None`` when the command ran past its timeout; its whole process group is then killed, because a
wedged GPU driver leaves ``nvidia-smi`` (and anything it forked) hanging in the kernel. A process in
uninterruptible sleep (D state: a GPU fallen off the bus, a frozen cgroup) ignores even SIGKILL: it is then
left behind after a short grace and the call returns anyway, its ``stderr`` saying so (:func:`did_not_exit`).
Nothing here ever waits on a child without a limit.

Programs are found one way, :func:`find_executable` over :func:`search_path`: the node's ``PATH`` first, in
its order, then fixed fallback directories (``/usr/local/nvidia/bin``...). ``PATH`` comes first because it is
what the operator gets when running the same command by hand over ssh (a venv's ``cmake`` before
``/usr/bin/cmake``); ansible-core's ``get_bin_path`` puts its extra directories *before* ``PATH`` and would
report a different tool than the one the operator sees.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import signal
import subprocess
import threading

NOT_FOUND_RC = 127


def _to_text(data):
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data


def _kill_group(proc):
    """SIGKILL the process group the child leads; it was started in its own session."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        try:
            proc.kill()
        except OSError:
            pass


# After SIGKILL, how long to wait for the process to go; a longer wait only delays a wedged node's answer.
KILL_GRACE = 2.0
# The words a caller can look for in ``stderr`` (see :func:`did_not_exit`).
DID_NOT_EXIT = "did not exit after SIGKILL"


def process_state(pid, root="/"):
    """The kernel's state letter of ``pid`` (``R``, ``S``, ``D``, ``Z``...), or None when it is gone."""
    try:
        with open(os.path.join(root, "proc", str(pid), "stat"), "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return None
    fields = text[text.rfind(")") + 2:].split()
    return fields[0] if fields else None


def did_not_exit(stderr):
    """Whether a ``run_with_timeout`` answer says the command outlived SIGKILL (it is still there)."""
    return DID_NOT_EXIT in (stderr or "")


def _close_pipes(proc):
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except (IOError, OSError):
                pass


def run_with_timeout(argv, timeout, env=None, cwd=None, kill_grace=KILL_GRACE, data=None):
    """Run ``argv`` (no shell); ``(rc, stdout, stderr)``, ``rc`` None after ``timeout`` seconds.

    ``data`` (text) is written to its standard input. A missing executable gives ``(127, '', '<why>')`` rather than
    an exception. After a timeout the process group
    is killed and waited for ``kill_grace`` seconds at most: a process that outlives SIGKILL (D state) is left
    where it is and ``stderr`` says ``did not exit after SIGKILL`` with its pid and state.
    """
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL if data is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,  # own process group, so a timeout can kill the whole tree
            close_fds=True,
        )
    except OSError as exc:
        return NOT_FOUND_RC if exc.errno in (errno.ENOENT, errno.EACCES) else 126, "", "%s: %s" % (argv[0], exc.strerror or exc)
    try:
        out, err = proc.communicate(None if data is None else data.encode("utf-8"), timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            # Pipes may still be held by a grandchild that escaped the group; do not wait on them forever.
            out, err = proc.communicate(timeout=kill_grace)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
            try:
                proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
        _close_pipes(proc)
        if proc.poll() is None:
            # Unkillable (uninterruptible sleep in the kernel): never wait() on it. The Popen object keeps the pid
            # on subprocess's list of children to reap later, should it ever exit.
            state = process_state(proc.pid)
            return None, _to_text(out), "%s: timed out after %ss and %s within %ss (pid %s, state %s%s); left behind" % (
                argv[0], timeout, DID_NOT_EXIT, kill_grace, proc.pid, state or "?",
                ": uninterruptible sleep" if state == "D" else "")
        return None, _to_text(out), "%s: timed out after %ss and was killed" % (argv[0], timeout)
    return proc.returncode, _to_text(out), _to_text(err)


def find_executable(name, search_paths=None, environ=None):
    """First executable ``name`` in ``search_paths`` (default: ``PATH``); an absolute ``name`` is checked as is."""
    if os.path.isabs(name):
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    if search_paths is None:
        environ = os.environ if environ is None else environ
        search_paths = [item for item in environ.get("PATH", os.defpath).split(os.pathsep) if item]
    seen = set()
    for directory in search_paths:
        if directory in seen:
            continue
        seen.add(directory)
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def search_path(extra_dirs, environ=None):
    """``PATH`` followed by ``extra_dirs`` not already on it: where a tool may live outside a login's PATH."""
    environ = os.environ if environ is None else environ
    dirs = [item for item in environ.get("PATH", os.defpath).split(os.pathsep) if item]
    return dirs + [item for item in extra_dirs if item not in dirs]


def side_by_side(calls):
    """``{name: callable()}`` for ``{name: callable}``, each in its own thread; the first exception (in the order
    given) is raised once every call has ended, as ``future.result()`` would. Plain threads, not
    ``concurrent.futures``: that import alone (it pulls in ``logging``) was a tenth of a health check run's CPU."""
    results, errors = {}, {}

    def call(name, function):
        try:
            results[name] = function()
        except BaseException as exc:  # pylint: disable=broad-except  # re-raised below, in the caller's thread
            errors[name] = exc

    threads = [threading.Thread(target=call, args=(name, function)) for name, function in calls.items()]
    for thread in threads:
        thread.daemon = True
        thread.start()
    for thread in threads:
        thread.join()
    for name in calls:
        if name in errors:
            raise errors[name]
    return dict((name, results[name]) for name in calls)
