# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet_memory on this host: the fixtures against the real ``free -h`` (procps-ng), and this host's live cgroup v1
memory controller (moved out of tests/unit: they need root, unshare, procps and a cgroup v1 memory hierarchy)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _memory
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._cgroupfs import parse_proc_cgroup_by_version as parse_proc_cgroup
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._memory import collect_memory, free_view, parse_meminfo

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "unit", "plugins", "module_utils", "fixtures", "memory")
MiB = 1024 ** 2
V1_MEMORY = "/sys/fs/cgroup/memory"


def fixture(case):
    return os.path.join(FIXTURES, case)


# --------------------------------------------------------------------------------------------
# the fixtures against the real `free -h` of this host (procps-ng), via a private mount namespace
# --------------------------------------------------------------------------------------------

def _real_free_h(meminfo_path):
    script = "mount --bind %s /proc/meminfo && exec free -h" % meminfo_path
    out = subprocess.check_output(["unshare", "--mount", "sh", "-c", script], universal_newlines=True)
    lines = dict((line.split()[0], line.split()[1:]) for line in out.splitlines()[1:])
    return dict(zip(("total", "used", "free", "shared", "buff_cache", "available"), lines["Mem:"]),
                **dict(zip(("swap_total", "swap_used", "swap_free"), lines["Swap:"])))


REAL_FREE = sorted(case for case in os.listdir(FIXTURES) if case != "old_kernel")  # procps' no-MemAvailable guess differs on purpose


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("free"),
                    reason="needs root, unshare and procps free")
@pytest.mark.parametrize("case", REAL_FREE)
def test_human_strings_equal_real_free_h(case):
    meminfo_path = os.path.join(fixture(case), "proc", "meminfo")
    expected = _real_free_h(meminfo_path)
    with open(meminfo_path) as handle:
        host = free_view(parse_meminfo(handle.read()))
    assert dict((name, host[name + "_human"]) for name in expected) == expected


# --------------------------------------------------------------------------------------------
# this live host (cgroup v1 memory controller)
# --------------------------------------------------------------------------------------------

def _own_v1_memory_path():
    with open("/proc/self/cgroup") as handle:
        return parse_proc_cgroup(handle.read())["v1"].get("memory")


LIVE_V1 = pytest.mark.skipif(
    not os.path.isdir(V1_MEMORY) or not os.path.exists("/proc/self/cgroup") or _own_v1_memory_path() is None,
    reason="needs the cgroup v1 memory controller at /sys/fs/cgroup/memory")


@LIVE_V1
def test_live_host_matches_direct_reads():
    path = _own_v1_memory_path()
    directory = (V1_MEMORY + path).rstrip("/")
    facts = collect_memory()
    with open(directory + "/memory.usage_in_bytes") as handle:
        usage = int(handle.read())
    assert facts["cgroup"]["version"] == 1
    assert facts["cgroup"]["path"] == path
    assert facts["cgroup"]["dir"] == directory
    assert abs(facts["cgroup"]["usage_bytes"] - usage) <= 64 * MiB
    assert facts["effective"]["total_bytes"] <= facts["host"]["total_bytes"]
    assert facts["errors"] == []


CHILD = """
import json, sys
sys.stdin.readline()  # wait until the parent has moved us into the test cgroup
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._memory import collect_memory
print(json.dumps(collect_memory()))
"""


@LIVE_V1
@pytest.mark.skipif(os.geteuid() != 0, reason="creating a memory cgroup needs root")
def test_child_in_256mib_cgroup_sees_256mib():
    collections_root = os.path.abspath(os.path.join(os.path.dirname(_memory.__file__), *([os.pardir] * 5)))
    child_dir = (V1_MEMORY + _own_v1_memory_path()).rstrip("/") + "/gpufleet-test-memory-%d" % os.getpid()
    os.mkdir(child_dir)
    try:
        with open(child_dir + "/memory.limit_in_bytes", "w") as handle:
            handle.write(str(256 * MiB))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([collections_root] + sys.path))
        child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 env=env, universal_newlines=True)
        try:
            with open(child_dir + "/cgroup.procs", "w") as handle:
                handle.write(str(child.pid))
            out, _err = child.communicate("go\n", timeout=120)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert child.returncode == 0
        facts = json.loads(out)
        assert facts["cgroup"]["dir"] == child_dir
        assert facts["cgroup"]["limit_bytes"] == 256 * MiB
        assert facts["cgroup"]["limit_dir"] == child_dir
        assert 0 < facts["cgroup"]["usage_bytes"] < 256 * MiB
        assert facts["effective"]["total_bytes"] == 256 * MiB
        assert facts["effective"]["total_human"] == "256Mi"
        assert facts["effective"]["limited_by"] == "cgroup"
        assert facts["effective"]["available_bytes"] == facts["cgroup"]["available_bytes"] < 256 * MiB
    finally:
        os.rmdir(child_dir)
