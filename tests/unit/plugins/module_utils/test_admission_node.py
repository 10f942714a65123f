# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the admission launcher reads of the node and does to a compile (plugins/module_utils/_build/_admission_node.py),
on the real /proc and real processes."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import subprocess
import sys
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_node as admission_node

GIB = 1024 ** 3


def test_parent_pids_and_resident_bytes_of_this_process(tmp_path):
    """Real /proc: this process's parent and resident size; a stat whose command name holds ") (" is read right."""
    parents = admission_node.parent_pids()
    assert parents[os.getpid()] == os.getppid()
    assert admission_node.resident_bytes([os.getpid()]) > 1024 * 1024
    assert admission_node.resident_bytes([2 ** 22 + 7]) == 0   # no such process: nothing
    fake = tmp_path / "proc" / "42"
    fake.mkdir(parents=True)
    (fake / "stat").write_bytes(b"42 (cc ) (x) S 7 42 42 0 -1")
    assert admission_node.parent_pids(str(tmp_path / "proc")) == {42: 7}


def test_cgroup_limit_v1_and_v2(tmp_path):
    (tmp_path / "memory" / "build").mkdir(parents=True)
    (tmp_path / "memory" / "build" / "memory.limit_in_bytes").write_text(str(4 * GIB))
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712")   # unlimited
    (tmp_path / "v2" / "b").mkdir(parents=True)
    (tmp_path / "v2" / "b" / "memory.max").write_text(str(3 * GIB))
    (tmp_path / "v2" / "memory.max").write_text("max")
    v1 = tmp_path / "v1.cgroup"
    v1.write_text("4:memory:/build\n0::/\n")
    assert admission_node.cgroup_limit(str(v1), str(tmp_path)) == 4 * GIB
    v2 = tmp_path / "v2.cgroup"
    v2.write_text("0::/b\n")
    assert admission_node.cgroup_limit(str(v2), str(tmp_path / "v2")) == 3 * GIB
    assert admission_node.cgroup_limit(str(tmp_path / "none"), str(tmp_path)) is None


def state_of(pid):
    with open("/proc/%d/stat" % pid) as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]


def wait_state(pid, wanted):
    deadline = time.time() + 10
    while time.time() < deadline:
        if state_of(pid) in wanted:
            return
        time.sleep(0.02)
    raise AssertionError("pid %d never reached %s (is %s)" % (pid, wanted, state_of(pid)))


def test_a_compiles_group_is_frozen_thawed_and_evicted_only_when_it_is_the_recorded_one():
    """A real process group (a shell and its child, as nvcc and cicc): frozen - both stopped -, thawed, never
    signalled when the ledger's start time is another process's, and evicted: killed, and not left stopped."""
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], preexec_fn=os.setpgrp)
    try:
        time.sleep(0.3)
        child = next(int(pid) for pid, row in admission_node.proc_table().items() if row[0] == leader.pid)
        entry = {"child": leader.pid, "child_start": admission_node.pid_start(leader.pid)}
        assert admission_node.signal_compile(entry, "freeze")
        wait_state(leader.pid, "T")
        wait_state(child, "T")
        assert admission_node.signal_compile(entry, "thaw")
        wait_state(child, "S")
        assert not admission_node.signal_compile(dict(entry, child_start=entry["child_start"] + 1), "freeze")
        assert state_of(child) == "S"
        assert not admission_node.signal_compile({"child": leader.pid}, "freeze")   # no start time: no signal
        assert admission_node.signal_compile(entry, "freeze")
        wait_state(child, "T")
        assert admission_node.signal_compile(entry, "evict")
        assert leader.wait(timeout=10) == -signal.SIGKILL
    finally:
        if leader.poll() is None:
            os.killpg(leader.pid, signal.SIGKILL)
            leader.wait()


def subreaper(on):
    """This process as a child subreaper (as guarded_build's holder is): an orphan stays in our session, so the
    kernel's orphaned-group rule (SIGHUP + SIGCONT) does not continue a stopped group for us."""
    import ctypes
    assert ctypes.CDLL(None, use_errno=True).prctl(36, int(on), 0, 0, 0) == 0   # PR_SET_CHILD_SUBREAPER


def test_the_group_of_a_gone_leader_is_still_reached():
    """nvcc killed with its launcher, its cicc stopped in the group and re-parented to guarded_build's holder: the
    group is evicted (killed, then continued), nothing stays stopped."""
    subreaper(True)
    try:
        leader = subprocess.Popen([sys.executable, "-c", "import os, time; os.fork() or time.sleep(60); time.sleep(60)"],
                                  preexec_fn=os.setpgrp)
        time.sleep(0.5)
        orphan = next(int(pid) for pid, row in admission_node.proc_table().items() if row[0] == leader.pid)
        entry = {"child": leader.pid, "child_start": admission_node.pid_start(leader.pid)}
        os.killpg(leader.pid, signal.SIGSTOP)
        leader.kill()
        leader.wait()
        wait_state(orphan, "T")
        time.sleep(0.3)
        assert state_of(orphan) == "T"      # stopped for good: nobody else would continue it
        assert admission_node.signal_compile(entry, "evict")
        assert os.waitpid(orphan, 0)[1] == signal.SIGKILL
    finally:
        subreaper(False)


def test_tree_sizes_and_memory_group():
    sizes = admission_node.tree_sizes(os.getpid())
    assert sizes[os.getpid()][1] > 1024 * 1024
    assert isinstance(admission_node.memory_group(), str)


def test_a_zombie_is_not_alive():
    """A compile killed and not yet reaped (a subreaper's child) holds nothing: its ledger entry is reclaimed."""
    child = subprocess.Popen(["true"])
    deadline = time.time() + 10
    while state_of(child.pid) != "Z" and time.time() < deadline:
        time.sleep(0.02)
    assert state_of(child.pid) == "Z" and not admission_node.pid_alive(child.pid)
    child.wait()
    assert admission_node.pid_alive(os.getpid())


def test_working_set_of_a_fixture_cgroup(tmp_path):
    own = tmp_path / "cgroup"
    own.write_text("4:memory:/b\n")
    folder = tmp_path / "memory" / "b"
    folder.mkdir(parents=True)
    (folder / "memory.usage_in_bytes").write_text(str(5 * GIB))
    (folder / "memory.limit_in_bytes").write_text("9223372036854771712")    # no limit of its own: not the build's
    assert admission_node.working_set(str(own), str(tmp_path)) is None
    (folder / "memory.limit_in_bytes").write_text(str(8 * GIB))
    (folder / "memory.stat").write_text("cache 10\ntotal_inactive_file %d\n" % GIB)
    assert admission_node.working_set(str(own), str(tmp_path)) == 4 * GIB
    assert admission_node.working_set(str(tmp_path / "none"), str(tmp_path)) is None


def test_a_doorbell_wakes_its_waiting_launcher_at_once_and_is_gone_after(tmp_path):
    state = str(tmp_path)
    bell = admission_node.open_doorbell(state, 4242)
    assert bell is not None
    started = time.time()
    assert admission_node.sleep_on(bell, 0.05) is False          # nobody rang: the whole poll
    assert time.time() - started >= 0.05
    ringer = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.path[:0] = %r; time.sleep(0.2)\n"
                               "from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_node as n\n"
                               "assert n.ring(%r, 4242)" % (sys.path, state)])
    started = time.time()
    assert admission_node.sleep_on(bell, 30) is True             # rung by another process: long before the poll
    assert time.time() - started < 10
    assert ringer.wait() == 0
    assert admission_node.ring(state, 4242) and admission_node.ring(state, 4242)
    assert admission_node.sleep_on(bell, 0.01) is True
    assert admission_node.sleep_on(bell, 0.01) is False          # both rings read at once: no second wake-up
    admission_node.close_doorbell(state, 4242, bell)
    assert not os.path.exists(admission_node.doorbell_path(state, 4242))
    assert admission_node.ring(state, 4242) is False             # nobody waits there any more
    left = admission_node.open_doorbell(state, 4343)                 # a waiter SIGKILLed: its FIFO stays ...
    os.close(left)
    admission_node.close_doorbell(state, 4343, None, gone=True)      # ... until its entry is reclaimed
    assert not os.path.exists(admission_node.doorbell_path(state, 4343))


def test_a_ring_never_writes_through_a_planted_file_or_link(tmp_path):
    state = str(tmp_path)
    os.mkdir(os.path.join(state, "wake"))
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(str(victim), admission_node.doorbell_path(state, 7))
    (tmp_path / "wake" / "8").write_text("planted")
    assert admission_node.ring(state, 7) is False
    assert admission_node.ring(state, 8) is False
    assert admission_node.ring(state, "../victim") is False
    assert victim.read_text() == "keep" and (tmp_path / "wake" / "8").read_text() == "planted"
    # a doorbell opened over a planted one replaces it; without a place for FIFOs a launcher polls as before
    bell = admission_node.open_doorbell(state, 8)
    assert bell is not None and admission_node.ring(state, 8)
    admission_node.close_doorbell(state, 8, bell)
    assert admission_node.open_doorbell(str(victim), 9) is None
    assert admission_node.sleep_on(None, 0.01) is False
