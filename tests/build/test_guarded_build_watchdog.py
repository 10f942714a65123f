# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watchdog, measured in a capped namespace "container" whose cgroupfs is read-only (as Docker and Kubernetes
mount it): the build that would OOM the container finishes by backoff with no kernel OOM kill; without the
watchdog the same build shows the kernel's kill. The module runs as Ansible runs it on a node (python + args file)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, own_memory_cgroup

HUNGRY_CMD = ("cmake -S . -B build -G Ninja -DHOG_MIB={mib} -DHOG_SECONDS=1 -DHOG_RAMP={ramp} "
              "&& cmake --build build")
MODULE = os.path.join(REPO, "plugins", "modules", "guarded_build.py")
CAP = 640 << 20


def oom_kills(cgroup):
    with open(os.path.join(cgroup, "memory.oom_control")) as handle:
        return int(re.search(r"^oom_kill (\d+)", handle.read(), re.M).group(1))


@pytest.fixture
def container():
    """A memory cgroup capped at 640 MiB (no swap past it) that the test's module runs in; emptied and removed after."""
    path = os.path.join(own_memory_cgroup(), "gpufleet-test-container-%d" % os.getpid())
    os.mkdir(path)
    try:
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as handle:
            handle.write(str(CAP))
        if os.path.exists(os.path.join(path, "memory.memsw.limit_in_bytes")):
            with open(os.path.join(path, "memory.memsw.limit_in_bytes"), "w") as handle:
                handle.write(str(CAP))
        yield path
    finally:
        for dummy in range(100):
            with open(os.path.join(path, "cgroup.procs")) as handle:
                pids = [int(pid) for pid in handle.read().split()]
            if not pids:
                break
            for pid in pids:  # only what the test started in its own cgroup
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.1)
        os.rmdir(path)


def run_in_container(cgroup, args, tmp_path, timeout=400):
    """The module in the container: its own mount namespace where the memory cgroupfs is bind-mounted read-only."""
    args_file = tmp_path / "args.json"
    args_file.write_text(u"%s" % json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    mount = "/sys/fs/cgroup/memory"
    inner = "mount --bind {m} {m} && mount -o remount,ro,bind {m} {m} && exec {py} {module} {args}".format(
        m=mount, py=sys.executable, module=MODULE, args=args_file)
    script = 'echo $$ > {procs} && exec unshare --mount sh -c "$0"'.format(procs=os.path.join(cgroup, "cgroup.procs"))
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, ".tmp", "collections"))
    proc = subprocess.run(["sh", "-c", script, inner], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, check=False)
    start = proc.stdout.find("{")
    try:
        return json.loads(proc.stdout[start:]), proc.stdout
    except ValueError:
        return None, proc.stdout


def hungry_args(hungry, confinement):
    return {"cmd": HUNGRY_CMD.format(mib=150, ramp=2), "chdir": hungry, "name": "watchdog", "jobs": 8,
            "memory_limit": "600MiB", "memory_per_thread": "150MiB", "reserve": "128MiB",
            "confinement": confinement, "max_attempts": 4, "status_interval": 0.5}


def test_watchdog_finishes_by_backoff_without_a_kernel_oom_kill(container, hungry, tmp_path):
    before = oom_kills(container)
    bystander = subprocess.Popen(["sh", "-c", "echo $$ > %s/cgroup.procs && exec sleep 600" % container])
    try:
        result, output = run_in_container(container, hungry_args(hungry, "auto"), tmp_path)
        assert result is not None, output
        attempts = result["attempts"]
        print("watchdog: kernel OOM kills %d; attempts (jobs, kind, duration, peak, why): %s" % (
            oom_kills(container) - before, [(a["jobs"], a["kind"], a["duration"], a["peak_memory_human"], a["why"][:50])
                                            for a in attempts]))
        assert not result.get("failed"), output
        confinement = result["confinement"]
        assert confinement["strategy"] == "watchdog" and confinement["requested"] == "auto"
        assert "read-only cgroupfs" in confinement["skipped"]["cgroupfs"]
        assert "PID 1 is not systemd" in confinement["skipped"]["systemd"]
        assert confinement["watched"] == container and confinement["floor_bytes"] == 128 << 20
        assert attempts[0]["kind"] == "oom" and "the watchdog stopped the build" in attempts[0]["watchdog"]
        assert attempts[-1]["kind"] == "ok" and result["final_jobs"] < 8
        assert [a["jobs"] for a in attempts] == [8 >> n for n in range(len(attempts))]
        assert oom_kills(container) == before, "the kernel's OOM killer never acted in the container"
        assert bystander.poll() is None, "the watchdog signals the build's own process group only"
        assert len([n for n in os.listdir(os.path.join(hungry, "build")) if n.startswith("unit_")]) == 12
    finally:
        bystander.kill()
        bystander.wait()


def test_without_the_watchdog_the_kernel_kills(container, hungry, tmp_path):
    """The control: the same build unconfined in the same container meets the kernel's OOM killer."""
    before = oom_kills(container)
    result, output = run_in_container(container, hungry_args(hungry, "none"), tmp_path)
    kills = oom_kills(container) - before
    print("unconfined: kernel OOM kills in the container %d; attempts %s" % (
        kills, [(a["jobs"], a["rc"], a["kind"]) for a in (result or {}).get("attempts", [])]))
    assert kills > 0, output
