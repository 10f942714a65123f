# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet build you can stop and see stop (issue 17 item 3), and a second build of a dir followed as its own run
(issue 18 finding 10), on a 3-node fleet with the hungry test project.

- playbooks/build_stop.yml in the middle of build_sgl_kernel.yml: the stopped nodes' rows turn "stopped" in the
  running playbook's table while the other finishes; nothing of the build is left running there, the lock is free
  and the status says "stopped"; a rerun resumes (the steps done before are not compiled again).
- Ctrl-C on build_sgl_kernel.yml during the watch: the playbook says the builds keep running and how to stop them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import re
import signal
import subprocess
import threading
import time

from fleetlib import REPO_ROOT, VENV_BIN, ansible_env, run_playbook
from conftest import PHASES, build_vars, hungry_source, status_of, wait_for

BUILD = os.path.join(REPO_ROOT, "playbooks", "build_sgl_kernel.yml")
STOP = os.path.join(REPO_ROOT, "playbooks", "build_stop.yml")
STEPS = 10
ROW_PHASES = PHASES + ("starting", "stopped")


def slow_vars(tmp_path, source, **more):
    """One job at a time, 10 steps of 3 s: about 30 s of compiling per node."""
    return build_vars(tmp_path, source, sgl_kernel_jobs=1, sgl_kernel_report_dir="", sgl_kernel_build_command=[
        "/bin/sh", "-c", "cmake -S . -B build -G Ninja -DHOG_MIB=20 -DHOG_SECONDS=3 -DHOG_STEPS=%d >/dev/null && "
        "cmake --build build" % STEPS], **more)


def hogs_in(node):
    """The hungry project's compile steps still running in a node (its own PID namespace)."""
    out = node.run("ps -eo comm= | grep -c '^hog$' || true", check=True).stdout.strip()
    return int(out or 0)


def units_done(tmp_path, name):
    """The hungry project's compile steps a node has finished (their objects in its build dir)."""
    return len(glob.glob(os.path.join(str(tmp_path), "src-%s" % name, "build", "unit_*.o")))


def last_rows(stdout, name):
    return re.findall(r"^%s +(%s) " % (name, "|".join(ROW_PHASES)), stdout, re.M)


def test_stop_in_the_middle_shows_stopped_leaves_nothing_and_a_rerun_resumes(fresh_fleet, tmp_path):
    fleet = fresh_fleet(3)
    source = hungry_source(tmp_path)
    variables = slow_vars(tmp_path, source)
    outcome = {}

    def build():
        outcome["result"] = run_playbook(BUILD, fleet.inventory_path, timeout=600, extra_vars=variables)

    runner = threading.Thread(target=build)
    started = time.time()
    runner.start()
    try:
        # two compile steps on disk, not "done >= 2": ninja's first two edges build the hog tool itself
        for name in ("node1", "node2"):
            wait_for(lambda name=name: units_done(tmp_path, name) >= 2
                     and status_of(tmp_path, name).get("updated_at", 0) > started, 300, "%s to compile" % name)
        first_run_id = status_of(tmp_path, "node1").get("run_id")
        assert first_run_id and first_run_id.startswith("node1-"), status_of(tmp_path, "node1")
        check = run_playbook(STOP, fleet.inventory_path, timeout=300, args=("--check",),
                             extra_vars=dict(variables, build_stop_hosts="node1:node2"))
        assert check.rc == 0, (check.stdout + check.stderr)[-4000:]
        assert status_of(tmp_path, "node1").get("state") == "running", "--check stopped nothing"
        stop = run_playbook(STOP, fleet.inventory_path, timeout=300, extra_vars=dict(variables, build_stop_hosts="node1:node2"))
        assert stop.rc == 0, (stop.stdout + stop.stderr)[-4000:]
    finally:
        runner.join(600)
    first = outcome["result"]
    out = first.stdout + first.stderr
    # a requested stop is no failure (issue 29 item 7: it ended the watching playbook fatal, rc 2): the stopped nodes
    # say so and leave the play, nothing fatal, and the exit status is 0 while the other node built
    assert first.rc == 0 and "fatal:" not in first.stdout, out[-4000:]
    for name in ("node1", "node2"):
        assert re.search(r"%s\] => \{\s*\"msg\": \"stopped on request \(build_stop\), not failed" % name, first.stdout), out[-4000:]
    assert re.search(r"^node1 +: ok=\d+ +changed=\d+ +unreachable=0 +failed=0", first.stdout, re.M), out[-3000:]
    for name in ("node1", "node2"):
        assert last_rows(first.stdout, name)[-1] == "stopped", (name, last_rows(first.stdout, name), out[-4000:])
        status = status_of(tmp_path, name)
        assert status["state"] == "stopped" and status["run_id"] == status_of(tmp_path, name)["run_id"], status
        assert hogs_in(fleet[name]) == 0, "%s still runs compile steps after the stop" % name
        done = units_done(tmp_path, name)
        assert 2 <= done < STEPS, (name, done)
    assert last_rows(first.stdout, "node3")[-1] == "done", out[-4000:]
    assert re.search(r"^BUILD \S+: 1 done, 2 stopped \(of 3\)$", first.stdout, re.M), first.stdout[-4000:]

    # the rerun resumes in the same dirs: only what the stop cut short is compiled, as a run of its own
    before = units_done(tmp_path, "node1")
    stopped_total = status_of(tmp_path, "node1")["steps_total"]
    again = run_playbook(BUILD, fleet.inventory_path, timeout=600, extra_vars=dict(variables, sgl_kernel_hosts="node1"))
    assert again.rc == 0, (again.stdout + again.stderr)[-4000:]
    assert last_rows(again.stdout, "node1")[-1] == "done"
    status = status_of(tmp_path, "node1")
    assert status["state"] == "succeeded" and status["run_id"] != first_run_id
    # its progress counts on from the stopped run's steps (issue 29 item 7: a resume read [0/2]), not from what was left
    assert status["progress"]["done"] == status["progress"]["total"] == stopped_total > STEPS - before, status["progress"]
    with open(status["log"]) as handle:
        last_attempt = handle.read().rsplit("=== gpufleet guarded_build: attempt", 1)[1]
    assert last_attempt.count("Compiling unit_") == STEPS - before, last_attempt[-2000:]


def test_ctrl_c_during_the_watch_says_the_builds_keep_running_and_how_to_stop_them(fresh_fleet, tmp_path):
    fleet = fresh_fleet(2)
    source = hungry_source(tmp_path)
    variables = slow_vars(tmp_path, source)
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", fleet.inventory_path, "-e", json.dumps(variables), BUILD]
    started = time.time()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ansible_env(None), cwd=REPO_ROOT,
                            start_new_session=True)
    try:
        wait_for(lambda: all((status_of(tmp_path, name).get("progress") or {}).get("done", 0) >= 1
                             and status_of(tmp_path, name).get("updated_at", 0) > started for name in ("node1", "node2")),
                 300, "both nodes to compile")
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C on a terminal does: the whole foreground group
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out = (stdout + stderr).decode("utf-8", "replace")
    assert "the builds on node1, node2 keep running" in out, out[-4000:]
    assert "ansible-playbook gpufleet.preflight.build_stop -i <inventory> -e build_stop_hosts=node1,node2" in out
    assert status_of(tmp_path, "node1").get("state") == "running", "the build runs on after Ctrl-C"
    stop = run_playbook(STOP, fleet.inventory_path, timeout=300, extra_vars=variables)
    assert stop.rc == 0, (stop.stdout + stop.stderr)[-4000:]
    for name in ("node1", "node2"):
        assert status_of(tmp_path, name)["state"] == "stopped"
        assert hogs_in(fleet[name]) == 0
