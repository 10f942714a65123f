# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-local check's run: its deadline fits the schedule (issue 28.6), one run at a time (issue 27.2), every
command bounded by the time left, children killed with the run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _hc_runtime as rt


def test_fit_refuses_what_slurmd_would_kill():
    assert rt.check_fit(50, 10, True, True, "slurm") == 50
    with pytest.raises(ValueError, match="gpu_timeout: 61 s cannot fit the health check's 50 s deadline .*at most 27 s"):
        rt.check_fit(50, 61, True, True, "slurm")
    with pytest.raises(ValueError, match="deadline_seconds: 70 s does not fit schedule slurm .*60 s.*at most 55 s"):
        rt.check_fit(70, 10, True, True, "slurm")
    with pytest.raises(ValueError, match="next run starts 1 min later"):
        rt.check_fit(55, 10, True, False, "cron", 1)
    assert rt.check_fit(50, 45, True, False, "cron") == 50  # no Slurm: only the margin kept
    assert rt.check_fit(50, 600, False, True, "slurm") == 50  # no GPUs gathered: gpu_timeout never waited on
    for bad in (True, "50", 1, 601, float("nan")):
        with pytest.raises(ValueError, match="deadline_seconds"):
            rt.check_fit(bad, 1, False, False)


def test_deadline_keeps_slurms_share():
    now = [100.0]
    deadline = rt.Deadline(50, True, clock=lambda: now[0])
    assert deadline.facts_left() == 50 - rt.MARGIN_SECONDS - rt.SLURM_RESERVE_SECONDS
    assert deadline.left() == 50 - rt.MARGIN_SECONDS
    now[0] += 40
    assert deadline.facts_left() < 0 < deadline.left()


def test_every_command_bounded_by_the_time_left():
    deadline = rt.Deadline(rt.MARGIN_SECONDS + 1.5, False)
    run = rt.bounded_run(deadline)
    started = time.monotonic()
    rc, _out, err = run(["sleep", "30"], 30)
    assert rc is None and "timed out after" in err and time.monotonic() - started < 4
    rc, _out, err = run(["true"], 30)
    assert rc is None and "deadline leaves no time" in err
    assert rt.bounded_run(rt.Deadline(50, False))(["sh", "-c", "echo hi"], 5) == (0, "hi\n", "")
    assert rt.bounded_run(rt.Deadline(50, False))(["/nonexistent/x"], 5)[0] == 127


def test_children_stay_in_our_process_group():
    """A kill of the check's process group (what slurmd does at 60 s) takes its children: not a session of their own."""
    run = rt.bounded_run(rt.Deadline(50, False))
    rc, out, _err = run([sys.executable, "-c", "import os; print(os.getpgrp(), os.getsid(0))"], 10)
    assert rc == 0 and out.split() == [str(os.getpgrp()), str(os.getsid(0))]


def test_child_dies_with_the_check(tmp_path):
    """PR_SET_PDEATHSIG: the check SIGKILLed alone leaves no child behind."""
    script = ("import sys; sys.path[:0] = %r\n"
              "from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _hc_runtime as rt\n"
              "import threading, os\n"
              "run = rt.bounded_run(rt.Deadline(50, False))\n"
              "threading.Thread(target=run, args=(['sh', '-c', 'echo $$ > %s; exec sleep 60'], 50)).start()\n"
              "threading.Event().wait(60)\n" % (sys.path, str(tmp_path / "pid")))
    check = subprocess.Popen([sys.executable, "-c", script])
    try:
        for _attempt in range(100):
            if (tmp_path / "pid").exists() and (tmp_path / "pid").read_text().strip():
                break
            time.sleep(0.05)
        child = int((tmp_path / "pid").read_text())
        os.kill(check.pid, 9)
        check.wait(5)
        for _attempt in range(40):
            if not os.path.exists("/proc/%d" % child) or open("/proc/%d/stat" % child).read().split(")")[1].split()[0] == "Z":
                break
            time.sleep(0.05)
        assert not os.path.exists("/proc/%d" % child) or "Z" in open("/proc/%d/stat" % child).read().split(")")[1][:3]
    finally:
        if check.poll() is None:
            check.kill()
            check.wait()


def test_one_run_at_a_time(tmp_path):
    path = rt.lock_path(str(tmp_path / "state"), "node1")
    fd, why = rt.take_lock(path)
    assert fd is not None and why is None
    holder = subprocess.run([sys.executable, "-c", "import sys; sys.path[:0] = %r\n"
                             "from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import "
                             "_hc_runtime as rt\nprint(rt.take_lock(%r)[1])" % (sys.path, path)],
                            stdout=subprocess.PIPE, universal_newlines=True, check=True, timeout=30)
    assert "a previous run is still running (pid %d, started" % os.getpid() in holder.stdout
    os.close(fd)
    fd, why = rt.take_lock(path)
    assert fd is not None
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def test_lock_never_blocks_on_a_planted_fifo_or_symlink(tmp_path):
    os.mkfifo(str(tmp_path / "health-check-a.lock"))
    os.symlink(str(tmp_path / "elsewhere"), str(tmp_path / "health-check-b.lock"))
    assert "not a plain file" in rt.take_lock(rt.lock_path(str(tmp_path), "a"))[1]
    assert "lock" in rt.take_lock(rt.lock_path(str(tmp_path), "b"))[1] and not os.path.exists(str(tmp_path / "elsewhere"))


def test_a_timeout_kills_the_childs_own_children(tmp_path):
    """The stub nvidia-smi hangs with a child of its own, as a wedged driver's wrapper may: none left behind."""
    pidfile = tmp_path / "pids"
    run = rt.bounded_run(rt.Deadline(50, False))
    rc, _out, err = run(["sh", "-c", "sleep 100 & echo $$ $! > %s; wait" % pidfile], 1)
    assert rc is None and "timed out after 1s and was killed" in err
    for pid in map(int, pidfile.read_text().split()):
        for _attempt in range(40):
            if not os.path.exists("/proc/%d" % pid):
                break
            time.sleep(0.05)
        assert not os.path.exists("/proc/%d" % pid), pid
