# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Version probes remembered between runs of node_facts and of the node-local health check (issue 30 item 3).

``cmake --version``, ``nvcc --list-gpu-arch``, ``gcc --version``... answer the same until the binary changes, and
they were most of a build-profile run's CPU (nvcc alone forks a shell and cicc's helpers). A probe is remembered by
the binary's identity - its resolved path, device, inode, size, modification and change times - so an upgrade, a reinstall or
a different toolkit on ``PATH`` is a new key. Only argument lists of version flags qualify (never nvidia-smi, never a
Python probe whose answer depends on what is installed beside the interpreter) and only answers with exit status 0.

The cache is a small JSON file - the health check's in its state directory, node_facts' in the user's cache
directory (``user_cache_path``) - read without following symlinks and never from a FIFO; anything wrong with it is
an empty cache, never an error of the run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import threading

from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file

VERSION_FLAGS = frozenset(("--version", "-version", "-V", "--list-gpu-arch", "--list-gpu-code", "-dumpversion",
                           "-dumpfullversion"))
# nvidia-smi --version reads the loaded driver, not the binary: a driver that no longer answers must fail every run.
NEVER_CACHED = frozenset(("nvidia-smi",))
MAX_BYTES = 256 * 1024
MAX_ENTRIES = 64
# A temporary file older than this was left by a run killed between writing and renaming (slurmd's kill at 60 s):
# removed by the next run that writes; a younger one may be another run's, writing now.
STALE_TEMP_SECONDS = 3600
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def probe_key(argv, stat_path=os.stat):
    """The cache key of a version probe, or None when ``argv`` is not one (or its binary cannot be read)."""
    if len(argv) < 2 or not os.path.isabs(argv[0]) or not all(arg in VERSION_FLAGS for arg in argv[1:]):
        return None
    if os.path.basename(argv[0]) in NEVER_CACHED:
        return None
    try:
        real = os.path.realpath(argv[0])
        info = stat_path(real)
    except OSError:
        return None
    # ctime last: a same-size rewrite in place with its mtime put back (touch -r, cp -p) keeps the other four, but
    # no one can set ctime back (the kernel sets it to now at every write or utime).
    return "%s %s|%d:%d:%d:%d:%d" % (real, " ".join(argv[1:]), info.st_dev, info.st_ino, info.st_size,
                                     _ns(info, "st_mtime"), _ns(info, "st_ctime"))


def _ns(info, field):
    return getattr(info, field + "_ns", None) or int(getattr(info, field) * 1e9)


def user_cache_path(name="node-facts-probes.json", environ=None, home=None):
    """Where node_facts keeps its probes: ``$XDG_CACHE_HOME/gpufleet-preflight/<name>``, else ``~/.cache/...``."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or os.path.join(home or os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpufleet-preflight", name)


def load(path):
    """``{key: [rc, out, err]}`` from the cache file, ``{}`` when it is absent or not what this module writes."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return {}
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return {}
        data = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return {}
    finally:
        os.close(fd)
    try:
        table = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return dict((key, value) for key, value in table.items()
                if isinstance(key, str) and isinstance(value, list) and len(value) == 3 and value[0] == 0
                and all(isinstance(text, str) for text in value[1:]))


def save(path, table, make_dir=False):
    """Write the cache beside itself and rename it into place (a reader sees the old file or the new one).
    ``make_dir``: create its directory (mode 0700) when missing; otherwise a missing directory means no cache."""
    directory = os.path.dirname(path)
    if make_dir and not os.path.isdir(directory):
        try:
            os.makedirs(directory, 0o700)
        except OSError:
            return
    if not os.path.isdir(directory):
        return
    kept = dict(sorted(table.items())[-MAX_ENTRIES:])
    try:
        write_file(path, json.dumps(kept), prefix=".probes-")
    except (OSError, ValueError):   # a read-only or full file system, a directory not ours: no cache this time
        return
    remove_stale_temps(directory)


def remove_stale_temps(directory, now=None):
    """Remove the ``.probes-*`` files of runs killed before their rename, once they are an hour old."""
    import time  # pylint: disable=import-outside-toplevel  # only after a write
    now = time.time() if now is None else now
    try:
        names = [name for name in os.listdir(directory) if name.startswith(".probes-")]
    except OSError:
        return
    for name in names:
        candidate = os.path.join(directory, name)
        try:
            info = os.lstat(candidate)
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > STALE_TEMP_SECONDS:
                os.unlink(candidate)
        except OSError:
            pass


class CachedRun(object):
    """A ``run(argv, timeout, ...)`` that answers version probes from the cache and remembers new ones."""

    def __init__(self, run, path):
        self._run, self.path = run, path
        self.table = load(path)
        self.hits = self.misses = 0
        self._changed = False
        self._lock = threading.Lock()  # the toolchain probes run side by side in threads

    def __call__(self, argv, timeout, env=None, cwd=None, data=None):
        key = probe_key(argv) if env is None and cwd is None and data is None else None
        if key is not None:
            with self._lock:
                if key in self.table:
                    self.hits += 1
                    return tuple(self.table[key])
        answer = self._run(argv, timeout, env=env, cwd=cwd, data=data)
        if key is not None and answer[0] == 0:
            with self._lock:
                self.misses += 1
                self.table[key] = [0, answer[1], answer[2]]
                self._changed = True
        return answer

    def save(self, make_dir=False):
        if self._changed:
            save(self.path, self.table, make_dir)
