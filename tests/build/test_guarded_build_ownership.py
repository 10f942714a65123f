# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A guarded build's owner and lifetime, for real (issue 18 findings 1-8, issue 17 item 3): a build's identity cannot be taken
over while its owner lives, the build dies with its module, nothing it starts outlives it, a signal burst ends it
cleanly, FIFOs and wrong-shaped state files neither hang nor crash it, concurrent builds keep their cgroups, and
``state: stopped`` stops a build through its owner."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import signal
import time

from conftest import build_cgroups, finish_module, own_memory_cgroup, processes_with, run_module, start_module, wait_for_status

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._confinement import CgroupfsConfinement

STATUS = os.path.join("build", "gpufleet-build.status.json")


def wait_gone(word, timeout=20):
    deadline = time.time() + timeout
    while processes_with(word) and time.time() < deadline:
        time.sleep(0.1)
    return processes_with(word)


def kill_all(word):
    for pid in processes_with(word):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def slow_args(chdir, word, name, confinement="cgroupfs", **extra):
    args = {"cmd": "sleep %s" % word, "chdir": chdir, "name": name, "jobs": 1, "memory_limit": "256MiB",
            "memory_per_thread": "16MiB", "status_interval": 0.2, "confinement": confinement}
    args.update(extra)
    return args


def running(chdir):
    return wait_for_status(os.path.join(chdir, STATUS), lambda s: s.get("state") == "running" and s.get("build_pgid"))


def test_a_replaced_build_dir_is_not_taken_over(tmp_path):
    """Finding 1: ``rm -rf build`` under a running build; the second run is refused naming the holder, and the
    first run's build lives on."""
    chdir = str(tmp_path)
    first = start_module(slow_args(chdir, "4101", "takeover"))
    try:
        status = running(chdir)
        shutil.rmtree(os.path.join(chdir, "build"))
        second = run_module(slow_args(chdir, "4101", "takeover"), timeout=120)
        assert second.get("failed"), second["_output"]
        assert "another build holds" in second["msg"] and str(status["module_pid"]) in second["msg"], second["msg"]
        assert "since" in second["msg"]
        assert processes_with("4101"), "the first run's build was killed by the second"
    finally:
        os.kill(status["module_pid"], signal.SIGTERM)
        result = finish_module(first, timeout=120)
    assert result.get("failed") and "stopped" in result["msg"]
    assert wait_gone("4101") == []
    assert build_cgroups("takeover") == []


def test_the_build_dies_with_its_module_and_a_rerun_sees_the_dead_owner(tmp_path):
    """Finding 2: SIGKILL of the module under ``none`` (and so ``watchdog``): the build dies with it; the rerun
    recognises the dead owner's ``running`` status."""
    chdir = str(tmp_path)
    args = slow_args(chdir, "4102", "killed", confinement="none")
    proc = start_module(args)
    status = running(chdir)
    os.kill(status["module_pid"], signal.SIGKILL)
    proc.communicate(timeout=60)
    try:
        assert wait_gone("4102", timeout=10) == [], "the build ran on unwatched after its module died"
    finally:
        kill_all("4102")
    rerun = run_module(dict(args, cmd="true"))
    assert not rerun.get("failed"), rerun["_output"]
    assert "module pid %d" % status["module_pid"] in rerun["stale_status"]
    assert "no longer runs" in rerun["stale_status"]


def test_nothing_the_build_starts_outlives_it(tmp_path):
    """Finding 3: a background child, a ``setsid`` daemon and a double fork outlive a successful build under
    ``none`` on main; here they are ended with the attempt and the next build of the dir runs."""
    chdir = str(tmp_path)
    cmd = "sleep 4103 & setsid sleep 4104 & (setsid sh -c 'sleep 4105 &' &) ; true"
    try:
        result = run_module({"cmd": cmd, "chdir": chdir, "jobs": 1, "memory_limit": "256MiB",
                             "memory_per_thread": "16MiB", "confinement": "none"})
        assert not result.get("failed"), result["_output"]
        for word in ("4103", "4104", "4105"):
            assert wait_gone(word, timeout=5) == [], "%s outlived the build" % word
        again = run_module({"cmd": "true", "chdir": chdir, "jobs": 1, "memory_limit": "256MiB",
                            "memory_per_thread": "16MiB", "confinement": "none", "force": True})
        assert not again.get("failed"), again["_output"]
    finally:
        for word in ("4103", "4104", "4105"):
            kill_all(word)


def test_a_command_starting_with_a_shell_builtin_runs(tmp_path):
    """Finding 4."""
    for index, cmd in enumerate(("ulimit -n 1024 && true", "umask 022; true", ": && true")):
        chdir = tmp_path / str(index)
        chdir.mkdir()
        result = run_module({"cmd": cmd, "chdir": str(chdir), "jobs": 1, "memory_limit": "256MiB",
                             "memory_per_thread": "16MiB", "confinement": "none"})
        assert not result.get("failed"), result["msg"]


def test_a_burst_of_sigterms_ends_the_build_and_its_cgroup(tmp_path):
    """Finding 5 and issue 17 item 3: five SIGTERMs a few ms apart; the module answers "stopped", the status says
    "stopped", nothing of the build runs and its cgroup is gone."""
    chdir = str(tmp_path)
    proc = start_module(slow_args(chdir, "4106", "burst"))
    status = running(chdir)
    try:
        for dummy in range(5):
            os.kill(status["module_pid"], signal.SIGTERM)
            time.sleep(0.004)
        result = finish_module(proc, timeout=120)
    finally:
        remaining = wait_gone("4106")
        kill_all("4106")
    assert result.get("failed") and "stopped" in result["msg"], result["_output"]
    assert remaining == []
    assert build_cgroups("burst") == []
    with open(os.path.join(chdir, STATUS)) as handle:
        assert json.load(handle)["state"] == "stopped"


def test_a_fifo_in_the_source_tree_is_never_opened(tmp_path):
    """Finding 6: fingerprinting a tree with a FIFO (no git work tree here) hung before any timeout started."""
    source = tmp_path / "src"
    source.mkdir()
    os.mkfifo(str(source / "pipe"))
    os.mkfifo(str(source / "extra.cmake"))
    result = run_module({"cmd": "true", "chdir": str(source), "jobs": 1, "memory_limit": "256MiB",
                         "memory_per_thread": "16MiB", "confinement": "none"}, timeout=90)
    assert not result.get("failed"), result["_output"]


def test_a_stamp_and_status_of_the_wrong_shape_are_ignored_by_name(tmp_path):
    """Finding 7: valid JSON of the wrong shape gave an AttributeError traceback."""
    for index, text in enumerate(("[1]", '"x"', "42")):
        chdir = tmp_path / str(index)
        (chdir / "build").mkdir(parents=True)
        (chdir / "build" / ".gpufleet-build.stamp").write_text(text)
        (chdir / "build" / "gpufleet-build.status.json").write_text(text)
        result = run_module({"cmd": "true", "chdir": str(chdir), "jobs": 1, "memory_limit": "256MiB",
                             "memory_per_thread": "16MiB", "confinement": "none"})
        assert not result.get("failed"), result["_output"]
        assert "Traceback" not in result["_output"]
        assert "is not a JSON object" in result["_output"] and ".gpufleet-build.stamp" in result["_output"]


def test_a_live_owners_cgroup_is_never_removed_by_another_build():
    """Finding 8: a build's just-made (still empty) cgroup was removed by another build's stale cleanup. A cgroup
    whose name says its owner lives is left alone; one whose owner is gone is removed."""
    base = own_memory_cgroup()
    live = CgroupfsConfinement("gpufleet-build-other-00000000", 1 << 28, 0)
    live.prepare()
    live_dir = os.path.join(base, live.unit)
    os.mkdir(live_dir)  # as its preexec makes it, before the build joins
    dead_dir = os.path.join(base, "gpufleet-build-gone-00000000-p999999999-s1")
    os.mkdir(dead_dir)
    try:
        mine = CgroupfsConfinement("gpufleet-build-mine-11111111", 1 << 28, 0)
        mine.prepare()
        assert os.path.isdir(live_dir), "another build removed a live owner's cgroup"
        assert not os.path.isdir(dead_dir), "a dead owner's empty cgroup stays"
    finally:
        for path in (live_dir, dead_dir):
            if os.path.isdir(path):
                os.rmdir(path)


def test_state_stopped_stops_the_build_through_its_owner(tmp_path):
    """Issue 17 item 3: ``state: stopped`` finds the live owner, SIGTERMs it and waits for "stopped"; again, it
    finds nothing to stop; check mode says what it would stop."""
    chdir = str(tmp_path)
    args = slow_args(chdir, "4107", "stopme", run_id="run-4107")
    proc = start_module(args)
    try:
        status = running(chdir)
        assert status["run_id"] == "run-4107" and status["module_start_time"]
        stop = {"chdir": chdir, "state": "stopped"}
        would = run_module(stop, check=True)
        assert would["changed"] and str(status["module_pid"]) in would["msg"], would["_output"]
        assert processes_with("4107")
        stopped = run_module(stop)
        assert stopped["changed"] and not stopped.get("failed"), stopped["_output"]
        assert stopped["run_id"] == "run-4107"
    finally:
        result = finish_module(proc, timeout=120)
        kill_all("4107")
    assert result.get("failed") and "stopped" in result["msg"]
    assert wait_gone("4107") == [] and build_cgroups("stopme") == []
    with open(os.path.join(chdir, STATUS)) as handle:
        assert json.load(handle)["state"] == "stopped"
    again = run_module(stop)
    assert not again["changed"] and not again.get("failed") and "nothing" in again["msg"]


def test_the_result_names_the_run_and_its_files(tmp_path):
    """Run identity for build_watch (H2): status and result carry run_id; the result names the status and stamp."""
    chdir = str(tmp_path)
    result = run_module({"cmd": "true", "chdir": chdir, "jobs": 1, "memory_limit": "256MiB",
                         "memory_per_thread": "16MiB", "confinement": "none"})
    assert not result.get("failed"), result["_output"]
    assert result["run_id"] and result["status_path"] == os.path.join(chdir, STATUS)
    assert result["stamp_path"] == os.path.join(chdir, "build", ".gpufleet-build.stamp")
    with open(result["status_path"]) as handle:
        status = json.load(handle)
    assert status["run_id"] == result["run_id"] and status["module_pid"] and status["module_start_time"]
    other = run_module({"cmd": "true", "chdir": chdir, "jobs": 1, "memory_limit": "256MiB", "force": True,
                        "memory_per_thread": "16MiB", "confinement": "none"})
    assert other["run_id"] != result["run_id"]


def test_a_dead_owners_running_status_is_stopped_by_state_stopped(tmp_path):
    """A status saying "running" whose module is gone: ``state: stopped`` marks it stopped (changed)."""
    chdir = tmp_path
    (chdir / "build").mkdir()
    (chdir / STATUS).write_text(json.dumps({"state": "running", "module_pid": 999999999, "module_start_time": 1,
                                            "run_id": "ghost"}))
    result = run_module({"chdir": str(chdir), "state": "stopped"})
    assert result["changed"] and not result.get("failed"), result["_output"]
    with open(str(chdir / STATUS)) as handle:
        assert json.load(handle)["state"] == "stopped"
