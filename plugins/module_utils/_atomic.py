# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one atomic file write (community.crypto's ``write_file`` shape): a temp file beside the target, written,
given its mode, renamed over the target; on any failure the temp file is removed and the error raised as it came.

One error policy: ``write_file`` never swallows nor translates an error -- an ``OSError`` (or the encoding's
``ValueError``) reaches the caller, which names it in its own terms (``StateError``, ``AnsibleActionFail``) or, for a
cache that may be missing, ignores it. Nothing is ever left half-written at the target, and no temp file is left
behind unless the process is killed between the create and the rename (``prefix`` lets a caller find those).

The temp name is unpredictable and created ``O_EXCL|O_NOFOLLOW`` (what ``tempfile.mkstemp`` does, without importing
``tempfile``: about 0.01 s of CPU on every health check), so whoever can write the directory cannot make the write
follow a planted symlink or block on a FIFO; the rename replaces the directory entry at the target, never what a
symlink there points to. Stdlib only, no import of the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import errno
import os

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _create(directory, prefix):
    """``(fd, path)`` of a new 0600 file with an unpredictable name in ``directory``."""
    for _attempt in range(100):
        path = os.path.join(directory, "%s%s.tmp" % (prefix, binascii.hexlify(os.urandom(6)).decode("ascii")))
        try:
            return os.open(path, _FLAGS, 0o600), path
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
    raise OSError(errno.EEXIST, "100 temporary names taken", directory)


def user_mode():
    """0666 less the process umask: the mode ``open()`` gives a new file (reading the umask means setting it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_file(path, content, mode=0o600, prefix=None, errors="strict"):
    """Write ``content`` (bytes, or text written as UTF-8 with ``errors``) to ``path`` atomically, with ``mode``
    (None: ``user_mode()``, as any file the user writes). ``prefix``: the temp file's name up to its random part
    (default ``.<name>.``). Returns ``path``."""
    mode = user_mode() if mode is None else mode
    directory = os.path.dirname(path) or "."
    data = content if isinstance(content, bytes) else content.encode("utf-8", errors)
    fd, tmp = _create(directory, "." + os.path.basename(path) + "." if prefix is None else prefix)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), mode)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
