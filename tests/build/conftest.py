# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Real builds on this host, through Ansible (``ansible localhost -m gpufleet.preflight.guarded_build``)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROJECTS = os.path.join(REPO, "tests", "projects")
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")


def ansible_env():
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".tmp", "collections"),
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
        ANSIBLE_DEPRECATION_WARNINGS="False",
        ANSIBLE_NOCOLOR="1",
    )
    return env


def module_command(args, check=False):
    argv = [ANSIBLE, "localhost", "-m", "gpufleet.preflight.guarded_build", "-a", json.dumps(args)]
    if check:
        argv.append("--check")
    return argv


def parse_result(output):
    """``localhost | CHANGED => {...}`` (minimal callback) -> the result dict."""
    marker = output.find("localhost | ")
    assert marker >= 0, output
    start = output.index("=> ", marker) + 3
    result = json.JSONDecoder().raw_decode(output[start:])[0]
    # the minimal callback says FAILED! in the header, not in the dict
    result["failed"] = output[marker:start].startswith("localhost | FAILED")
    return result


def run_module(args, check=False, timeout=600):
    proc = subprocess.run(module_command(args, check), env=ansible_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout, check=False)
    result = parse_result(proc.stdout)
    result["_output"] = proc.stdout
    return result


def start_module(args):
    """The module in the background (for the lock and kill-midway tests); returns the Popen."""
    return subprocess.Popen(module_command(args), env=ansible_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True)


def finish_module(proc, timeout=600):
    out, dummy = proc.communicate(timeout=timeout)
    result = parse_result(out)
    result["_output"] = out
    return result


def wait_for_status(path, predicate, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(path) as handle:
                status = json.load(handle)
            if predicate(status):
                return status
        except (IOError, OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError("status %s never matched" % path)


def processes_with(word, zombies=True):
    """Pids whose command line holds ``word`` as one argument (the tests' unique sleep durations); ``zombies``:
    count the ones that have exited and wait to be reaped."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                argv = handle.read().split(b"\0")
            if not zombies:
                with open("/proc/%s/stat" % name) as handle:
                    if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                        continue
        except (IOError, OSError, IndexError):
            continue
        if word.encode() in argv:
            found.append(int(name))
    return found


def own_memory_cgroup():
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            parts = line.strip().split(":", 2)
            if "memory" in parts[1].split(","):
                return "/sys/fs/cgroup/memory" + parts[2].rstrip("/")
    return None


def build_cgroups(name):
    base = own_memory_cgroup()
    return glob.glob(os.path.join(base, "gpufleet-build-%s-*" % name)) if base else []


@pytest.fixture
def hungry(tmp_path):
    """A fresh copy of the memory-hungry synthetic project."""
    target = str(tmp_path / "hungry")
    shutil.copytree(os.path.join(PROJECTS, "hungry"), target)
    return target


def pytest_collection_modifyitems(config, items):
    base = own_memory_cgroup()
    reason = None
    if os.geteuid() != 0:
        reason = "real builds need root to create memory cgroups"
    elif not base or not os.access(base, os.W_OK):
        reason = "no writable cgroup v1 memory controller"
    elif not shutil.which("cmake") or not shutil.which("ninja") or not shutil.which("cc"):
        reason = "cmake, ninja and a C compiler are needed"
    if reason and os.environ.get("CI") == "true":
        # CI installs everything these builds need: a missing piece there is a failure, never a skip.
        raise pytest.UsageError("tests/build: %s (CI=true: failing instead of skipping)" % reason)
    if reason:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=reason))
