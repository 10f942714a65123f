# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guarded_build for real on a hostile node (issues 11 and 12): a node without git, the module killed with -9 (the build
goes with it, the stale status and cgroup are recognised), a full filesystem under log_path, a
build directory owned by another user."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
import time

from conftest import ansible_env, build_cgroups, module_command, own_memory_cgroup, run_module, wait_for_status
from proctools import rmdir_retrying

HUNGRY_CMD = "cmake -S . -B build -G Ninja -DHOG_MIB={mib} -DHOG_SECONDS={seconds} && cmake --build build"


def test_a_node_without_git_stamps_the_tree(tmp_path):
    """A minimal image: no git anywhere on PATH. The stamp falls back to the content of the tree."""
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    source = tmp_path / "src"
    source.mkdir()
    (source / "kernel.cu").write_text(u"__global__ void k() {}\n")
    (source / "dist").mkdir()
    args = {"argv": ["/bin/sh", "-c", "echo built > dist/k.whl"], "chdir": str(source),
            "jobs": 1, "memory_limit": "256MiB", "memory_per_thread": "16MiB", "artifacts": ["dist/*.whl"],
            "environment": {"PATH": str(empty_bin), "PIP_INDEX_URL": "https://user:s3cret@example.org/simple"}}
    result = run_module(args)
    assert not result.get("failed"), result["_output"]
    assert "s3cret" not in result["_output"], "environment is no_log: its values are in no result or invocation"
    with open(result["stamp"]) as handle:
        stamp = handle.read()
    assert "s3cret" not in stamp and '"PIP_INDEX_URL"' in stamp, "the stamp names the variables and hashes the values"
    assert result["source_revision"]["kind"] == "tree" and result["source_revision"]["why"] == "no git on this node"
    assert result["env"]["PIP_INDEX_URL"] == "********", "environment values are never returned"
    again = run_module(args)
    assert again["up_to_date"] is True and again["changed"] is False
    (source / "kernel.cu").write_text(u"__global__ void k2() {}\n")
    assert run_module(args)["up_to_date"] is False


def test_kill_9_of_the_module_ends_its_build_and_the_rerun_sees_the_dead_owner(hungry, tmp_path):
    """kill -9 of the module: its holder ends the build (nothing runs on unguarded, issue 18 finding 2), the lock
    goes with the module; the next run reports the abandoned status, removes the dead run's cgroup and builds."""
    args = {"cmd": HUNGRY_CMD.format(mib=10, seconds=1), "chdir": hungry, "name": "kill9", "jobs": 1,
            "memory_limit": "256MiB", "memory_per_thread": "16MiB", "status_interval": 0.3, "confinement": "cgroupfs"}
    status_path = os.path.join(hungry, "build", "gpufleet-build.status.json")
    # the killed module cannot remove its AnsiballZ payload: let it leave it in this test's own tmp
    env = dict(ansible_env(), TMPDIR=str(tmp_path))
    proc = subprocess.Popen(module_command(args), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True)
    status = wait_for_status(status_path, lambda s: (s.get("progress") or {}).get("done", 0) >= 2)
    os.kill(status["module_pid"], signal.SIGKILL)
    proc.communicate(timeout=60)
    (cgroup,) = build_cgroups("kill9")
    deadline = time.time() + 20
    while True:  # the holder ends the orphaned build at once
        with open(os.path.join(cgroup, "cgroup.procs")) as handle:
            if not handle.read().split():
                break
        assert time.time() < deadline, "the build ran on after its module was killed"
        time.sleep(0.2)
    with open(status_path) as handle:
        assert json.load(handle)["state"] == "running", "the killed module could not update it"
    resumed = run_module(args)
    assert not resumed.get("failed"), resumed["_output"]
    assert "left its status at 'running' and no longer runs" in resumed["stale_status"]
    assert any("removed the stale cgroup %s" % cgroup in note for note in resumed["confinement"]["notes"])
    assert build_cgroups("kill9") == []


def test_full_filesystem_under_log_path(hungry, tmp_path):
    """The log's filesystem is full: the message names the log, the cgroup goes, the status is not "running"."""
    full = tmp_path / "full"
    full.mkdir()
    subprocess.check_call(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)])
    try:
        with open(str(full / "filler"), "wb") as handle:
            try:
                handle.write(b"x" * (128 << 10))
            except (IOError, OSError):
                pass
        result = run_module({"cmd": HUNGRY_CMD.format(mib=10, seconds=0.1), "chdir": hungry, "name": "fullfs2",
                             "jobs": 1, "memory_limit": "256MiB", "memory_per_thread": "16MiB",
                             "log_path": str(full / "build.log"), "status_path": str(full / "status.json")})
    finally:
        subprocess.check_call(["umount", str(full)])
    assert result.get("failed")
    assert str(full / "build.log") in result["msg"] and "No space left on device" in result["msg"], result["msg"]
    assert "Traceback" not in result["_output"]
    assert build_cgroups("fullfs2") == []
    if os.path.exists(str(full / "status.json")):
        with open(str(full / "status.json")) as handle:
            assert json.load(handle)["state"] != "running"


def test_a_build_dir_owned_by_another_user_is_refused(hungry):
    build = os.path.join(hungry, "build")
    os.mkdir(build)
    os.chown(build, 65534, 65534)
    victim = os.path.join(hungry, "victim")
    with open(victim, "w") as handle:
        handle.write("precious")
    os.symlink(victim, os.path.join(build, "gpufleet-build.log"))  # what the other user planted
    result = run_module({"cmd": HUNGRY_CMD.format(mib=10, seconds=0.1), "chdir": hungry, "jobs": 1,
                         "memory_limit": "256MiB", "memory_per_thread": "16MiB"})
    assert result.get("failed")
    assert "refusing build_dir %s: it is owned by uid 65534" % build in result["msg"], result["msg"]
    with open(victim) as handle:
        assert handle.read() == "precious"


def procs(cgroup):
    with open(os.path.join(cgroup, "cgroup.procs")) as handle:
        return handle.read().split()


def test_other_builds_cgroups_are_left_alone_and_empty_stale_ones_removed(hungry):
    base = own_memory_cgroup()
    busy = os.path.join(base, "gpufleet-build-otherbuild-00000000")
    empty = os.path.join(base, "gpufleet-build-gonebuild-11111111-p999999999-s1")  # its owner is gone
    os.mkdir(busy)
    os.mkdir(empty)
    other = subprocess.Popen(["sh", "-c", "echo $$ > %s/cgroup.procs && exec sleep 600" % busy])
    try:
        deadline = time.time() + 10
        while not procs(busy):
            assert time.time() < deadline
            time.sleep(0.05)
        result = run_module({"cmd": HUNGRY_CMD.format(mib=10, seconds=0.1), "chdir": hungry, "name": "neighbour",
                             "jobs": 1, "memory_limit": "256MiB", "memory_per_thread": "16MiB",
                             "confinement": "cgroupfs"})
        assert not result.get("failed"), result["_output"]
        assert other.poll() is None and os.path.isdir(busy), "another build's cgroup and process are never touched"
        assert not os.path.exists(empty)
        assert "removed the stale cgroup %s" % empty in result["confinement"]["notes"]
    finally:
        other.kill()
        other.wait()
        for path in (busy, empty):
            rmdir_retrying(path)
