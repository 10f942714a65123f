# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The test fleet's ground floor (tests/tools/fleetlib.py): the checkout's paths, the run id, the result and error
types, and small file and process helpers every other fleet module uses."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import errno
import os
import re
import signal


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.join(REPO_ROOT, ".venv", "bin")
ANSIBLE_CONFIG = os.path.join(REPO_ROOT, "ansible.cfg")
COLLECTIONS_PATH = os.path.join(REPO_ROOT, ".tmp", "collections")

RUN_ID_PREFIX = "gpufleet-test-"   # the policy default oom_ignore_cgroups leaves the fleet's kills out of the host's verdict
RUN_ID_RE = re.compile(r"^gpufleet-(\d+)-[0-9a-f]{8}$")
DEFAULT_FLEET_SIZE = 8
NODE_PYTHON = "/usr/bin/python3"

# Seconds measured by the fixtures and tests, printed in the pytest summary.
TIMINGS = {}

CommandResult = collections.namedtuple("CommandResult", "rc stdout stderr duration")


class FleetError(Exception):
    """The fleet could not be brought up (or down); the message says why."""


def read_text(path):
    with open(path) as handle:
        return handle.read()


def write_text(path, text):
    with open(path, "w") as handle:
        handle.write(text)


def kill_quietly(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def pid_alive(pid):
    """True for a live process; a zombie (dead, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except OSError as exc:
        if exc.errno != errno.EPERM:
            return False
    try:
        return not re.search(r"^State:\s+Z", read_text("/proc/%d/status" % pid), re.M)
    except (IOError, OSError):
        return False


def nspids(pid):
    """The NSpid line of /proc/<pid>/status: [host pid, ..., innermost pid]."""
    try:
        for line in read_text("/proc/%d/status" % pid).splitlines():
            if line.startswith("NSpid:"):
                return [int(p) for p in line.split()[1:]]
    except (IOError, OSError):
        pass
    return []


def processes_mentioning(needle):
    """Host pids whose command line contains needle (e.g. a fleet dir)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except (IOError, OSError):
            continue
        if needle in cmdline:
            found.append((int(entry), cmdline.strip()))
    return found
