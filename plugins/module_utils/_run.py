# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a command with a hard timeout, and find executables the way a node's operator would.

``run_with_timeout`` is the ``run`` callable every collector takes: ``(argv, timeout) -> (rc, stdout, stderr)``.
``rc`` is ``None`` when the command ran past its timeout; its whole process group is then killed, because a
wedged GPU driver leaves ``nvidia-smi`` (and anything it forked) hanging in the kernel.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import signal
import subprocess

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


def run_with_timeout(argv, timeout, env=None, cwd=None):
    """Run ``argv`` (no shell); ``(rc, stdout, stderr)``, ``rc`` None after ``timeout`` seconds.

    A missing executable gives ``(127, '', '<why>')`` rather than an exception.
    """
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
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
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            # Pipes may still be held by a grandchild that escaped the group; do not wait on them forever.
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
            proc.wait()
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
