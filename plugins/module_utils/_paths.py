# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one "is this path in or under that one" rule, for filesystem paths, mount points and cgroup paths.

Node side (mounts, cgroup hierarchies, OOM kills in a cgroup) and controller side (does an OOM kill
concern this node) ask the same question; they import :func:`is_within` from here so the answer is the
same everywhere.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath

# Where shared libraries live, relative to a root: Debian/Ubuntu multiarch, RHEL's lib64, /usr/local.
SYSTEM_LIB_DIRS = (
    "usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib64", "usr/lib", "lib/x86_64-linux-gnu",
    "lib/aarch64-linux-gnu", "lib64", "lib", "usr/local/lib", "usr/local/lib64",
)


def _clean(path):
    """``/a//b/./c/`` -> ``/a/b/c``; ``None`` or ``""`` -> None (a path nobody named is within nothing)."""
    if not path:
        return None
    cleaned = posixpath.normpath(path)
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")  # POSIX keeps a leading "//"; for us it is "/"
    return cleaned


def is_within(path, prefix):
    """Whether ``path`` is ``prefix`` itself or lies below it, component by component.

    ``/scratch/build`` is within ``/scratch``; ``/scratchpad`` is not (a substring or a bare
    ``startswith`` says it is); trailing and doubled slashes do not matter; ``/`` holds every
    absolute path. A path and a prefix of different kinds (one absolute, one relative) or a
    missing one (``None``, ``""``) are never within each other.
    """
    path, prefix = _clean(path), _clean(prefix)
    if path is None or prefix is None or path.startswith("/") != prefix.startswith("/"):
        return False
    if prefix == "/":
        return True
    return path == prefix or path.startswith(prefix + "/")
