# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_build_stop: state=stopped finds the owner (verified by pid and start time), SIGTERMs it, waits for "stopped";
a dead owner's status is marked stopped; nothing running is ok (real processes stand in for the owner)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_engine import BuildError
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import process_start_time
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_stop import stop_build
from ansible_collections.gpufleet.preflight.plugins.modules.guarded_build import ARGUMENT_SPEC

# an owner: takes the build's lock in the registry and writes its running status (as GuardedBuild does), and on
# SIGTERM marks it stopped and exits
OWNER = r"""
import json, os, signal, sys, time
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_state import BuildLock
path, ignore = sys.argv[1], sys.argv[2] == "ignore"
with open("/proc/self/stat") as handle:
    start = int(handle.read().rsplit(")", 1)[1].split()[19])
status = {"state": "running", "run_id": "owner-run", "module_pid": os.getpid(), "module_start_time": start}
lock = BuildLock(os.path.dirname(path)).acquire(status)
def stop(signum, frame):
    if ignore:
        return
    status["state"] = "stopped"
    lock.release()
    with open(path + ".tmp", "w") as handle:
        json.dump(status, handle)
    os.rename(path + ".tmp", path)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
with open(path + ".tmp", "w") as handle:
    json.dump(status, handle)
os.rename(path + ".tmp", path)
while True:
    time.sleep(0.05)
"""


class Located(object):
    """What stop_build needs of a GuardedBuild: its params, locate() and warnings."""

    def __init__(self, chdir):
        self.params = dict((key, spec.get("default")) for key, spec in ARGUMENT_SPEC.items())
        self.params.update(chdir=chdir, state="stopped")
        self.warnings = []

    def locate(self):
        self.chdir = self.params["chdir"]
        self.build_dir = os.path.join(self.chdir, "build")
        self.status_path = os.path.join(self.build_dir, "gpufleet-build.status.json")
        self.stamp_path = os.path.join(self.build_dir, ".gpufleet-build.stamp")


def owner(tmp_path, ignore=False):
    (tmp_path / "build").mkdir(exist_ok=True)
    path = str(tmp_path / "build" / "gpufleet-build.status.json")
    # the child imports the collection: give it this interpreter's path (ansible-test units does not export one)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(entry for entry in sys.path if entry))
    proc = subprocess.Popen([sys.executable, "-c", OWNER, path, "ignore" if ignore else "obey"], env=env)
    deadline = time.time() + 20
    while not os.path.exists(path):
        assert time.time() < deadline
        time.sleep(0.05)
    return proc, path


def test_a_live_owner_is_stopped_and_waited_for(tmp_path):
    proc, path = owner(tmp_path)
    try:
        would = stop_build(Located(str(tmp_path)), 10, check_mode=True)
        assert would["changed"] and "would stop run owner-run (module pid %d)" % proc.pid in would["msg"]
        assert proc.poll() is None, "check mode signals nothing"
        result = stop_build(Located(str(tmp_path)), 10)
        assert result["changed"] and result["run_id"] == "owner-run" and result["module_pid"] == proc.pid
        assert proc.wait(timeout=10) == 0
        with open(path) as handle:
            assert json.load(handle)["state"] == "stopped"
    finally:
        proc.kill()
        proc.wait()


def test_an_owner_that_does_not_stop_in_time_is_reported(tmp_path):
    proc, dummy = owner(tmp_path, ignore=True)
    try:
        with pytest.raises(BuildError) as err:
            stop_build(Located(str(tmp_path)), 1)
        assert "run owner-run (module pid %d)" % proc.pid in str(err.value) and "did not stop within 1 s" in str(err.value)
    finally:
        proc.kill()
        proc.wait()


def test_a_reused_pid_is_never_signalled(tmp_path):
    """A status naming a live pid with another start time: that process is someone else's."""
    (tmp_path / "build").mkdir()
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        status = {"state": "running", "run_id": "old", "module_pid": bystander.pid,
                  "module_start_time": process_start_time(bystander.pid) - 1}
        (tmp_path / "build" / "gpufleet-build.status.json").write_text(json.dumps(status))
        result = stop_build(Located(str(tmp_path)), 5)
        assert bystander.poll() is None
        assert result["changed"] and "no longer running" in result["msg"] and "marked it stopped" in result["msg"]
        with open(str(tmp_path / "build" / "gpufleet-build.status.json")) as handle:
            assert json.load(handle)["state"] == "stopped"
    finally:
        bystander.kill()
        bystander.wait()


def test_a_status_naming_a_live_process_is_no_proof(tmp_path):
    """Issue 28 item 1: a status planted in the build dir names a live process (pid and start time right) that
    holds no lock of this build: it is never signalled, and the refusal says why."""
    (tmp_path / "build").mkdir()
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        status = {"state": "running", "run_id": "planted", "module_pid": bystander.pid,
                  "module_start_time": process_start_time(bystander.pid)}
        (tmp_path / "build" / "gpufleet-build.status.json").write_text(json.dumps(status))
        with pytest.raises(BuildError) as err:
            stop_build(Located(str(tmp_path)), 5)
        assert "refusing to signal module pid %d" % bystander.pid in str(err.value)
        assert "no proof" in str(err.value) and "Nothing was signalled" in str(err.value)
        time.sleep(0.2)
        assert bystander.poll() is None, "a process a status file named was signalled"
        with open(str(tmp_path / "build" / "gpufleet-build.status.json")) as handle:
            assert json.load(handle)["state"] == "running", "the claim is reported, not rewritten"
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_build_dir_of_another_user_is_refused(tmp_path):
    (tmp_path / "build").mkdir()
    os.chown(str(tmp_path / "build"), 65534, 65534)
    with pytest.raises(BuildError) as err:
        stop_build(Located(str(tmp_path)), 5)
    assert "refusing build_dir" in str(err.value) and "owned by uid 65534" in str(err.value)
    assert "nothing was stopped" in str(err.value)


def test_nothing_running_is_ok(tmp_path):
    result = stop_build(Located(str(tmp_path)), 5)
    assert not result["changed"] and result["msg"] == "nothing is running in %s" % (tmp_path / "build")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gpufleet-build.status.json").write_text(u'["not", "an", "object"]')
    located = Located(str(tmp_path))
    assert not stop_build(located, 5)["changed"]
    assert "is not a JSON object" in located.warnings[0]


def test_a_bad_stop_timeout_is_named(tmp_path):
    located = Located(str(tmp_path))
    located.params["stop_timeout"] = 0
    with pytest.raises(BuildError) as err:
        stop_build(located, 0)
    assert "stop_timeout" in str(err.value)
