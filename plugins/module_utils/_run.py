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
import select
import selectors
import signal
import subprocess
import threading
import time

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


# Bytes of each of a command's streams kept in memory: a probe that prints faster than its timeout (a broken driver's
# endless error lines, 50 MB of `nvidia-smi -q`) is read to its end or its deadline, the rest dropped, never held.
OUTPUT_KEPT = 16 * 1024 ** 2
CUT_NOTE = "output cut at %d bytes"


class _BoundedReader:
    """Feeds ``data`` to a child's stdin and reads its stdout and stderr side by side (one selector, so neither pipe
    fills and blocks the child), keeping at most ``kept`` bytes of each and dropping the rest."""

    def __init__(self, proc, data, kept):
        self.proc = proc
        self.kept = kept
        self.buffers = {proc.stdout: bytearray(), proc.stderr: bytearray()}
        self.cut = set()
        self.pending = memoryview(data) if data else None
        self.selector = selectors.DefaultSelector()
        for stream in (proc.stdout, proc.stderr):
            self.selector.register(stream, selectors.EVENT_READ)
        if proc.stdin is not None:
            if self.pending:
                self.selector.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                self._close_stdin()

    def _close_stdin(self):
        try:
            self.proc.stdin.close()
        except (IOError, OSError):
            pass

    def _write(self, key):
        try:
            written = os.write(key.fd, self.pending[:select.PIPE_BUF])
        except OSError:   # the child closed its stdin (EPIPE): what it did not read is not ours to force on it
            written = len(self.pending)
        self.pending = self.pending[written:]
        if not self.pending:
            self.selector.unregister(key.fileobj)
            self._close_stdin()

    def _read(self, key):
        chunk = os.read(key.fd, 65536)
        if not chunk:
            self.selector.unregister(key.fileobj)
            return
        buffer = self.buffers[key.fileobj]
        room = self.kept - len(buffer)
        if room > 0:
            buffer += chunk[:room]
        if len(chunk) > room:
            self.cut.add(key.fileobj)

    def read_until(self, deadline):
        """Read until both streams end (True) or ``deadline`` (time.monotonic) passes (False)."""
        while self.selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for key, _events in self.selector.select(remaining):
                if key.fileobj is self.proc.stdin:
                    self._write(key)
                else:
                    self._read(key)
        return True

    def texts(self):
        """(stdout, stderr) as text; a stream cut at ``kept`` bytes says so at its end."""
        out, err = (_to_text(bytes(self.buffers[stream])) for stream in (self.proc.stdout, self.proc.stderr))
        if self.proc.stdout in self.cut:
            out += "\n[%s]" % (CUT_NOTE % self.kept)
        if self.proc.stderr in self.cut:
            err += "\n[%s]" % (CUT_NOTE % self.kept)
        return out, err

    def close(self):
        self.selector.close()


def run_with_timeout(argv, timeout, env=None, cwd=None, kill_grace=KILL_GRACE, data=None, kept=OUTPUT_KEPT):
    """Run ``argv`` (no shell); ``(rc, stdout, stderr)``, ``rc`` None after ``timeout`` seconds.

    ``data`` (text) is written to its standard input. A missing executable gives ``(127, '', '<why>')`` rather than
    an exception. At most ``kept`` bytes of each stream are kept (the rest is read and dropped, and the stream ends
    with ``[output cut at N bytes]``). After a timeout the process group
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
    reader = _BoundedReader(proc, None if data is None else data.encode("utf-8"), kept)
    try:
        deadline = time.monotonic() + timeout
        ended = reader.read_until(deadline)
        if ended:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:   # closed its pipes but runs on
                ended = False
        if ended:
            out, err = reader.texts()
            return proc.returncode, out, err
        _kill_group(proc)
        # Pipes may still be held by a grandchild that escaped the group; do not wait on them forever.
        grace_ends = time.monotonic() + kill_grace
        reader.read_until(grace_ends)
        out, _err = reader.texts()
        try:
            proc.wait(timeout=max(0.1, grace_ends - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    finally:
        reader.close()
        _close_pipes(proc)
    if proc.poll() is None:
        # Unkillable (uninterruptible sleep in the kernel): never wait() on it. The Popen object keeps the pid
        # on subprocess's list of children to reap later, should it ever exit.
        state = process_state(proc.pid)
        return None, out, "%s: timed out after %ss and %s within %ss (pid %s, state %s%s); left behind" % (
            argv[0], timeout, DID_NOT_EXIT, kill_grace, proc.pid, state or "?",
            ": uninterruptible sleep" if state == "D" else "")
    return None, out, "%s: timed out after %ss and was killed" % (argv[0], timeout)


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
