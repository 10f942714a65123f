# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A guarded_build status file read on the node, bounded (module ``build_status``, used by ``build_watch``).

The status file lives in the build dir, which a user or another run may have replaced by anything: a 100 MB
file, a FIFO, a directory, JSON of another shape. Reading it must never hang (a FIFO is opened non-blocking and
refused), never take more than ``max_bytes`` of memory or transfer, and say what is wrong in one line naming the
file. The shape is checked on the controller (``plugin_utils/_build_view_input.check_status``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import stat

DEFAULT_MAX_BYTES = 1 << 20  # guarded_build's own file is about 10-30 KiB (240 timeline samples)
MIN_MAX_BYTES = 4096
MAX_MAX_BYTES = 64 << 20
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def read_status(path, max_bytes=DEFAULT_MAX_BYTES):
    """``{"exists", "size", "status", "error"}`` for the status file at ``path``: ``status`` is the parsed JSON
    (any shape) or None; ``error`` one line naming the file when it cannot be a status file. Never blocks."""
    found = {"exists": False, "size": None, "status": None, "error": None}
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return found  # not written yet (queued), or the build dir is not there yet
        if exc.errno == errno.ELOOP:
            found.update(exists=True, error="%s is a symbolic link, not a status file guarded_build writes" % path)
        else:
            found.update(exists=True, error="%s: %s" % (path, exc.strerror or exc))
        return found
    found["exists"] = True
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            found["error"] = "%s is not a regular file (%s): not a status file guarded_build writes" % (
                path, _kind(info.st_mode))
            return found
        found["size"] = info.st_size
        if info.st_size > max_bytes:
            found["error"] = "%s is %d bytes, more than the %d a status file may be: not read" % (
                path, info.st_size, max_bytes)
            return found
        data = _read_at_most(fd, max_bytes + 1)
    except OSError as exc:
        found["error"] = "%s: %s" % (path, exc.strerror or exc)
        return found
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # grew since fstat
        found["error"] = "%s is more than the %d bytes a status file may be: not read" % (path, max_bytes)
        return found
    try:
        found["status"] = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        found["error"] = "%s is not JSON: %s" % (path, str(exc)[:200])
    return found


def _read_at_most(fd, limit):
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(65536, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _kind(mode):
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "mode %o" % mode
