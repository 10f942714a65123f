# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small /proc and cgroup helpers the suites that run real processes share (tests/build, tests/host; the fleet's own
are in fleet_base.py and fleet_cgroups.py). The build and host conftests put tests/tools on sys.path."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import time


def proc_stats():
    """``(pid, fields)`` of every process now, ``fields`` being /proc/<pid>/stat after the command name: ``fields[0]``
    the state (``T`` stopped, ``Z`` zombie), ``fields[1]`` the parent pid, ``fields[2]`` the process group."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as handle:
                    text = handle.read()
            except (IOError, OSError):
                continue
            yield int(name), text.rsplit(")", 1)[1].split()


def rmdir_retrying(path, tries=50, pause=0.1):
    """Remove a directory (a cgroup stays busy a moment after its last process exited), trying ``tries`` times
    ``pause`` seconds apart; True once it is gone (or was never there)."""
    for _attempt in range(tries):
        try:
            os.rmdir(path)
            return True
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return True
            time.sleep(pause)
    return not os.path.exists(path)
