# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 12 item 1: an nvidia-smi stuck in the kernel (D state) ignores SIGKILL; the gpus subset must give up.

Reproduced for real: a stub nvidia-smi puts itself into a cgroup v1 freezer cgroup, which the test freezes.
A frozen task does not die of SIGKILL on cgroup v1. The collector runs in a child Python with a hard limit,
so a hang fails this test instead of hanging the suite. Everything is thawed, killed and removed after.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
import sys
import time

import pytest

FREEZER = "/sys/fs/cgroup/freezer"
GPU_TIMEOUT = 2

STUB = """#!/bin/sh
echo $$ > "{cgroup}/cgroup.procs"
echo $$ > "{pidfile}"
exec sleep 600
"""

COLLECT = """
import json, sys
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._gpus import collect_gpus
print(json.dumps(collect_gpus(timeout=%s, search_paths=[sys.argv[1]])))
""" % GPU_TIMEOUT


def _write(path, text):
    with open(path, "w") as handle:
        handle.write(text)


def _read(path):
    with open(path) as handle:
        return handle.read()


def _state(pid):
    try:
        text = _read("/proc/%d/stat" % pid)
    except (IOError, OSError):
        return None
    return text[text.rfind(")") + 2:].split()[0]


@pytest.fixture
def frozen_cgroup(tmp_path):
    if os.geteuid() != 0 or not os.path.isdir(FREEZER) or not os.access(FREEZER, os.W_OK):
        pytest.skip("needs root and a writable cgroup v1 freezer at %s" % FREEZER)
    cgroup = os.path.join(FREEZER, "gpufleet-wedged-%d" % os.getpid())
    os.mkdir(cgroup)
    try:
        yield cgroup
    finally:
        # Kill first (the signal stays pending while frozen), then thaw so it is delivered, then remove.
        for pid in _read(os.path.join(cgroup, "cgroup.procs")).split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        _write(os.path.join(cgroup, "freezer.state"), "THAWED")
        deadline = time.monotonic() + 10
        while _read(os.path.join(cgroup, "cgroup.procs")).split() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.rmdir(cgroup)


def test_wedged_nvidia_smi_gives_up_after_timeout_plus_grace(frozen_cgroup, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pidfile = tmp_path / "smi.pid"
    stub = bin_dir / "nvidia-smi"
    stub.write_text(STUB.format(cgroup=frozen_cgroup, pidfile=pidfile))
    stub.chmod(0o755)

    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", COLLECT, str(bin_dir)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, universal_newlines=True)
    try:
        deadline = time.monotonic() + 10
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pidfile.exists(), "the stub nvidia-smi never started"
        smi_pid = int(pidfile.read_text())
        _write(os.path.join(frozen_cgroup, "freezer.state"), "FROZEN")
        while _read(os.path.join(frozen_cgroup, "freezer.state")).strip() != "FROZEN" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _read(os.path.join(frozen_cgroup, "freezer.state")).strip() == "FROZEN"
        try:
            out, err = child.communicate(timeout=GPU_TIMEOUT + 20)
        except subprocess.TimeoutExpired:
            pytest.fail("the gpus collector still waits on a frozen nvidia-smi %ds after gpu_timeout=%ds"
                        % (int(time.monotonic() - started), GPU_TIMEOUT))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    elapsed = time.monotonic() - started
    assert child.returncode == 0, err
    facts = json.loads(out)
    assert facts["state"] == "timeout" and facts["present"] is False and facts["count"] == 0
    assert "nvidia-smi did not exit (D state: the driver is wedged)" in facts["message"], facts["message"]
    assert "pid %d" % smi_pid in facts["message"]
    # gpu_timeout plus the kill grace (2 s) plus Python's start: never the unbounded wait of before.
    assert elapsed < GPU_TIMEOUT + 8, elapsed
    # The process was left where it was (not waited on, not lost from view): still there, still frozen.
    assert _state(smi_pid) is not None
