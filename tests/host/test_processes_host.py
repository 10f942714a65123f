# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_processes and _reap against this host's real processes (moved out of tests/unit: they need real /proc)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._processes import collect_build_processes, read_stat
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._reap import protected_pids, reap


def pids(facts):
    return [proc["pid"] for proc in facts["processes"]]


def test_real_proc_scan_never_counts_itself():
    """On this host's /proc: a child of ours named like a build tool is ours, not a build."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        facts = collect_build_processes(extra_names=[os.path.basename(sys.executable)])
        assert child.pid not in pids(facts)
        assert os.getpid() not in pids(facts)
        assert facts["scanned"] > 1
    finally:
        child.kill()
        child.wait()


# --- reaping real processes ---------------------------------------------------------------------

def as_selected(pid):
    stat = read_stat(pid)
    return {"pid": pid, "ppid": stat["ppid"], "name": stat["comm"], "user": "root", "cmdline": stat["comm"],
            "start_ticks": stat["start_ticks"], "state": stat["state"], "zombie": stat["state"] == "Z"}


@pytest.fixture
def children():
    started = []

    def start(argv, ready=False):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE if ready else None)
        if ready:
            assert proc.stdout.readline().strip() == b"ready"   # its SIGTERM trap is in place
        started.append(proc)
        return proc
    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def stopped_by(proc):
    """The signal that ended a child, reaped here (a child of ours stays a zombie until waited)."""
    return -proc.wait(timeout=5)


def test_reap_term_then_kill(children):
    polite = children(["sleep", "60"])
    stubborn = children(["bash", "-c", 'trap "" TERM; echo ready; while :; do sleep 0.05; done'], ready=True)
    bystander = children(["sleep", "60"])
    result = reap([as_selected(polite.pid), as_selected(stubborn.pid)], grace=0.5)
    assert result["changed"] is True
    assert [(item["pid"], item["how"]) for item in result["killed"]] == sorted([(polite.pid, "term"), (stubborn.pid, "kill")])
    assert result["remaining"] == []
    assert stopped_by(polite) == signal.SIGTERM
    assert stopped_by(stubborn) == signal.SIGKILL
    assert bystander.poll() is None


def test_reap_check_mode_kills_nothing(children):
    target = children(["sleep", "60"])
    result = reap([as_selected(target.pid)], grace=0, check_mode=True)
    assert result["changed"] is True
    assert result["killed"] == []
    assert [item["pid"] for item in result["would_kill"]] == [target.pid]
    assert target.poll() is None


def test_reap_skips_a_reused_pid(children):
    """A pid whose start time changed is another process now: it must not be signalled."""
    target = children(["sleep", "60"])
    selected = as_selected(target.pid)
    selected["start_ticks"] -= 1
    result = reap([selected], grace=0)
    assert result == {"killed": [], "remaining": [], "would_kill": [], "changed": False}
    assert target.poll() is None


def test_reap_twice_is_unchanged(children):
    target = children(["sleep", "60"])
    selection = [as_selected(target.pid)]
    assert reap(selection, grace=1)["changed"] is True
    assert stopped_by(target) == signal.SIGTERM
    assert reap(selection, grace=1) == {"killed": [], "remaining": [], "would_kill": [], "changed": False}


def test_reap_never_signals_itself_pid1_or_ancestors(children):
    me = as_selected(os.getpid())
    parent = as_selected(os.getppid())
    init = dict(me, pid=1, start_ticks=read_stat(1)["start_ticks"])
    result = reap([me, parent, init], grace=0)
    assert result["changed"] is False
    assert sorted(item["pid"] for item in result["remaining"]) == sorted([1, os.getpid(), os.getppid()])
    assert all(item["reason"].startswith("protected") for item in result["remaining"])
    assert {1, os.getpid(), os.getppid()} <= protected_pids()


def test_reap_leaves_zombies_to_their_parent(children):
    target = children(["sleep", "60"])
    target.send_signal(signal.SIGKILL)
    for _attempt in range(100):
        if read_stat(target.pid)["state"] == "Z":
            break
        subprocess.call(["sleep", "0.01"])
    selected = as_selected(target.pid)
    assert selected["zombie"] is True
    result = reap([selected], grace=0)
    assert result["changed"] is False
    assert result["remaining"][0]["reason"].startswith("zombie")
