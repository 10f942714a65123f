# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a compiler cache directory is safe to build from (issue 28 item 8): whoever can write a cache can
replace any object it hands to the build, so a directory another user could write is refused (or warned by
``compiler_cache_dir_policy``). The rule is the pure :func:`unsafe_cache_reason`; the look at the disk beside it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

POLICIES = ("refuse", "warn")  # compiler_cache_dir_policy: what an unsafe cache directory does to the build


def unsafe_cache_reason(cache, above, entries, euid):
    """Why a cache directory may hand a planted object to the build, or None. Whoever can write a cache can replace
    any object every later build links into its wheel: code execution in the wheel.

    ``cache``: ``(path, uid, mode)`` of the cache directory, None when it does not exist yet (the cache makes it);
    ``above``: the same for each existing directory above it, up to ``/``; ``entries``: ``(path, uid)`` at the cache
    directory's top. The cache directory must be the build user's and writable by nobody else - a sticky bit does
    not help there, anyone could make the subdirectories the cache fills - and each directory above it the build
    user's or root's, writable by others only with the sticky bit (then nobody else can rename what is ours)."""
    if cache is not None:
        path, uid, mode = cache
        if uid != euid:
            return "%s is owned by uid %d, not by the build's user (uid %d)" % (path, uid, euid)
        if mode & 0o022:
            return "%s is writable by %s (mode %04o)" % (path, _who(mode), mode & 0o7777)
    for path, uid, mode in above:
        if uid not in (euid, 0):
            return "%s, above the cache, is owned by uid %d: that user may replace the cache directory" % (path, uid)
        if mode & 0o022 and not mode & 0o1000:
            return "%s, above the cache, is writable by %s without the sticky bit (mode %04o): they may replace " \
                   "the cache directory" % (path, _who(mode), mode & 0o7777)
    for entry in entries:
        path, uid = entry[0], entry[1]
        if uid != euid:
            return "the cache holds %s, owned by uid %d: that user may write objects into it" % (path, uid)
        mode = entry[2] if len(entry) > 2 else 0
        if stat.S_ISDIR(mode) and mode & 0o002:
            return "the cache holds %s, writable by everyone (mode %04o): anyone may write objects into it" % (
                path, mode & 0o7777)
    return None


def _who(mode):
    return "everyone" if mode & 0o002 else "its group"


def cache_directory_levels(path, limit=4096):
    """``(cache, above, entries)`` of ``path`` (symlinks resolved) for :func:`unsafe_cache_reason`. ``entries``:
    ``(path, uid, mode)`` of the cache's top level and of the level below it (ccache and sccache keep their objects
    in ``a/b/``: a foreign folder one level down was let through); at most ``limit`` entries in all."""
    real = os.path.realpath(path)
    cache, entries = None, []
    if os.path.isdir(real):
        info = os.stat(real)
        cache = (real, info.st_uid, info.st_mode)
        entries = _entries(real, limit)
        for folder in [entry[0] for entry in entries if stat.S_ISDIR(entry[2])]:
            entries.extend(_entries(folder, limit - len(entries)))
    above, current = [], real
    while current != "/":
        current = os.path.dirname(current)
        if os.path.isdir(current):
            info = os.stat(current)
            above.append((current, info.st_uid, info.st_mode))
    return cache, above, entries


def _entries(folder, limit):
    """``(path, uid, mode)`` of at most ``limit`` entries of ``folder`` (lstat: a link is looked at, not followed)."""
    found = []
    try:
        for name in sorted(os.listdir(folder))[:max(limit, 0)]:
            info = os.lstat(os.path.join(folder, name))
            found.append((os.path.join(folder, name), info.st_uid, info.st_mode))
    except OSError:
        pass
    return found


def check_cache_directory(path, policy, euid=None):
    """None when the cache directory ``path`` is safe; with ``policy`` ``warn`` the warning text; ValueError naming
    what to fix with ``refuse``."""
    euid = os.geteuid() if euid is None else euid
    try:
        why = unsafe_cache_reason(*(cache_directory_levels(path) + (euid,)))
    except OSError as exc:
        why = "%s cannot be checked: %s" % (path, exc.strerror or exc)
    if why is None:
        return None
    text = ("compiler cache directory %s: %s. Whoever can write a compiler cache can replace any object it hands "
            "to the build: code in every wheel built from it. Give the cache a directory of the build's user, mode "
            "0700 or 0755 (chown/chmod it)" % (path, why))
    if policy == "warn":
        return text + "; compiler_cache_dir_policy=warn: building with it anyway"
    raise ValueError(text + ", or set compiler_cache_dir_policy=warn to build with it anyway")
