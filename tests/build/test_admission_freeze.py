# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Freeze before kill and the live budget (issue 35 items 1 and 2) with real processes in a real memory cgroup: a
limit halved mid-build, a source over the live budget, and a frozen compile at a stop or a killed launcher. What the
launcher did is read from the ledger's own log; OOM kills from the cgroup's memory.oom_control."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

from conftest import PROJECTS, REPO, own_memory_cgroup
from fleet_cgroups import remove_cgroup_tree
from proctools import proc_stats

ADMISSION = os.path.join(REPO, "plugins", "module_utils", "_build", "_admission.py")
HOGCC = os.path.join(PROJECTS, "standin_mixed_memory", "hogcc.py")
MIB = 1024 ** 2


@contextlib.contextmanager
def memory_cgroup(name, limit_mib):
    """A child of this process's memory cgroup with a limit (no swap here: /proc/swaps is empty on these machines,
    and memsw is set where it exists); emptied and removed afterwards, even when the test failed with launchers or
    frozen compiles still in it."""
    path = os.path.join(own_memory_cgroup(), "gpufleet-test-freeze-%s-%d" % (name, os.getpid()))
    os.mkdir(path)
    try:
        set_limit(path, limit_mib)
        yield path
    finally:
        remove_cgroup_tree(path)


def set_limit(path, limit_mib, deadline=10.0):
    """Write the limit (v1 refuses one below the usage with EBUSY while it cannot reclaim: retry a while)."""
    end = time.time() + deadline
    while True:
        try:
            with open(os.path.join(path, "memory.limit_in_bytes"), "w") as handle:
                handle.write(str(limit_mib * MIB))
            return
        except OSError:
            if time.time() > end:
                raise
            time.sleep(0.05)


def oom_kills(path):
    with open(os.path.join(path, "memory.oom_control")) as handle:
        return int(dict(line.split() for line in handle).get("oom_kill", 0))


def joiner(path):
    def join():
        with open(os.path.join(path, "cgroup.procs"), "w") as handle:
            handle.write(str(os.getpid()))
    return join


def write_config(path, **settings):
    base = {"reserve_bytes": 16 * MIB, "default_bytes": 100 * MIB, "poll_seconds": 0.05, "sample_seconds": 0.2,
            "settle_seconds": 0.3}
    base.update(settings)
    path.write_text(json.dumps(base))
    return str(path)


def sources(src, **hogs):
    src.mkdir(exist_ok=True)
    for name, (mib, seconds) in hogs.items():
        (src / (name + ".c")).write_text("/* gpufleet-hog: %d %s */\nint %s(void) { return 1; }\n" % (mib, seconds, name))


def launch(config, src, name, out, group=None, wrapper=()):
    return subprocess.Popen([sys.executable, ADMISSION, "--config=" + config, "--"] + list(wrapper) +
                            [sys.executable, HOGCC, "cc", "-c", str(src / name), "-o", str(out / (name + ".o"))],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                            preexec_fn=joiner(group) if group else None)


def events(state, kind=None):
    try:
        with open(str(state / "ledger.log")) as handle:
            rows = [json.loads(line) for line in handle]
    except OSError:
        return []
    return [row for row in rows if kind in (None, row["event"])]


def failures(procs, outs, *groups):
    """What went wrong, short enough for the last lines CI keeps: each launcher that failed (its index, status and last
    line) and the OOM kills of each cgroup; ``([], [0, ...])`` when all went well."""
    failed = [(index, proc.returncode, (out.strip().splitlines() or [""])[-1][-160:])
              for index, (proc, out) in enumerate(zip(procs, outs)) if proc.returncode != 0]
    return failed, [oom_kills(group) for group in groups]


def ledger(state):
    try:
        return json.loads((state / "ledger.json").read_text())
    except (OSError, ValueError):
        return {}


def test_a_limit_halved_mid_build_freezes_and_evicts_never_oom_kills(tmp_path):
    """Six compiles of 200 MiB (grown over 2 s, held 2 s more), four CPUs, a 1,000 MiB cgroup: cold, four start at
    once. Half a second in, the limit drops to 500 MiB. The launchers read it at their next sample and keep what runs
    under it - frozen, or evicted and queued again - so the build ends with every compile done and 0 OOM kills (a
    budget read once, at the start, gave 3 OOM kills in the field)."""
    src, state = tmp_path / "src", tmp_path / "state"
    sources(src, **dict(("s%d" % index, (200, 4)) for index in range(6)))
    config = write_config(tmp_path / "c.json", state_dir=str(state), peaks_path=str(tmp_path / "peaks.json"),
                          root=str(src), cpus=4)
    with memory_cgroup("halved", 1000) as group:
        procs = [launch(config, src, "s%d.c" % index, tmp_path, group) for index in range(6)]
        deadline = time.time() + 30
        while len(events(state, "start")) < 4 and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        set_limit(group, 500)
        halved = time.time()
        outs = [proc.communicate(timeout=180)[0] for proc in procs]
        outcome = failures(procs, outs, group)
    assert outcome == ([], [0]), (outs, events(state))
    rows = events(state)
    assert max(row["running"] for row in rows if row["event"] == "start") >= 3, rows     # cold ran wide
    relieved = [row for row in rows if row["event"] in ("freeze", "evict") and row["t"] >= halved]
    assert relieved and all(row["budget"] <= 500 * MIB for row in relieved), rows
    assert all(row["budget"] <= 500 * MIB for row in rows if row["event"] == "start" and row["t"] >= halved + 1), rows
    assert ledger(state) == {}


def test_a_learned_source_over_the_live_budget_waits_named_and_starts_when_the_budget_comes_back(tmp_path):
    """Learned at 300 MiB, in a cgroup of 250: it never starts into the OOM killer - it waits, saying what it needs
    and what the build's memory allows; raised to 600 MiB, it starts and builds. With the limit left low it fails
    after oversize_wait_seconds, naming the source, instead of hanging."""
    src, state = tmp_path / "src", tmp_path / "state"
    sources(src, gemm=(300, 1))
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({"gemm.c": {"peak_bytes": 300 * MIB, "seconds": 1.0, "killed": False}}))
    config = write_config(tmp_path / "c.json", state_dir=str(state), peaks_path=str(peaks), root=str(src), cpus=2,
                          oversize_wait_seconds=60)
    with memory_cgroup("oversize", 250) as group:
        proc = launch(config, src, "gemm.c", tmp_path, group)
        time.sleep(2.0)
        assert proc.poll() is None and events(state, "start") == []
        set_limit(group, 600)
        out = proc.communicate(timeout=60)[0]
        assert oom_kills(group) == 0
    assert proc.returncode == 0, out
    assert "gemm.c needs 0.3 GiB alone; the build's memory now allows 0.2 GiB" in out, out
    short = write_config(tmp_path / "short.json", state_dir=str(state), peaks_path=str(peaks), root=str(src), cpus=2,
                         oversize_wait_seconds=1)
    with memory_cgroup("oversize-fail", 250) as group:
        proc = launch(short, src, "gemm.c", tmp_path, group)
        out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 1 and "gemm.c needs 0.3 GiB alone" in out and "not started" in out, out


def test_a_launcher_starved_past_its_sampling_window_keeps_its_compile(tmp_path):
    """A launcher whose samples come further apart than its growth window (descheduled on a loaded machine; here
    stopped 1.6 s) still has its previous sample: it died of an IndexError, its compile with it (CI, 2026-12-05). It
    finishes, learns the source, and its ledger entry says how far apart its samples came (the freeze looks further
    ahead while they do)."""
    src, state = tmp_path / "src", tmp_path / "state"
    sources(src, lone=(50, 4))
    config = write_config(tmp_path / "c.json", state_dir=str(state), peaks_path=str(tmp_path / "peaks.json"),
                          root=str(src), cpus=2)
    proc = launch(config, src, "lone.c", tmp_path)
    deadline = time.time() + 30
    while not events(state, "start") and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGSTOP)
    time.sleep(1.6)
    os.kill(proc.pid, signal.SIGCONT)
    gaps, until = [], time.time() + 0.6    # its next samples: the first after the stop says how long it was
    while time.time() < until:
        gaps += [entry.get("gap") or 0 for entry in ledger(state).values()]
        time.sleep(0.02)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, out
    assert max(gaps or [0]) >= 1.5, (sorted(set(gaps)), out)
    assert "lone.c" in json.loads((tmp_path / "peaks.json").read_text()), out


@contextlib.contextmanager
def subreaper():
    """This process as a child subreaper, as guarded_build's holder is: an orphaned compile stays in our session, so
    the kernel's orphaned-group rule (SIGHUP + SIGCONT) does not continue a stopped one for us - only the launcher can."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, 1, 0, 0, 0) == 0   # PR_SET_CHILD_SUBREAPER
    try:
        yield
    finally:
        libc.prctl(36, 0, 0, 0, 0)
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break


def stopped_in_group(pgid):
    """The pids of group ``pgid`` that are stopped (state T)."""
    return [pid for pid, fields in proc_stats() if int(fields[2]) == pgid and fields[0] == "T"]


def frozen_pair(tmp_path, name):
    """Two compiles in a 300 MiB budget that each grow to 200 MiB (a shell around each, as nvcc around cicc): the
    younger is frozen. (launchers, the frozen one's ledger entry)."""
    src, state = tmp_path / name, tmp_path / (name + "-state")
    sources(src, first=(200, 6), second=(200, 6))
    config = write_config(tmp_path / (name + ".json"), state_dir=str(state), peaks_path=str(tmp_path / (name + ".peaks")),
                          root=str(src), cpus=2, budget_bytes=300 * MIB, reserve_bytes=0, settle_seconds=1.0)
    shell = ("sh", "-c", '"$@"; exit $?', "sh")
    procs = {}
    for source in ("first", "second"):   # together: the settling moment starts both, each claiming 100 MiB
        procs[source] = launch(config, src, source + ".c", tmp_path, wrapper=shell)
    deadline = time.time() + 30
    while time.time() < deadline:
        frozen = [(pid, entry) for pid, entry in ledger(state).items() if entry.get("frozen")]
        if frozen:
            return procs, frozen[0], state
        time.sleep(0.05)
    raise AssertionError("nothing was frozen: %s" % events(state))


def test_a_stop_or_a_killed_launcher_leaves_no_frozen_compile_behind(tmp_path):
    """A frozen compile whose launcher gets SIGINT (ninja's Ctrl-C) ends, thawed to see it; one whose launcher is
    SIGKILLed (its shell dies with it, the compiler under it stays in the stopped group) is ended by the next
    launcher that reads the ledger. No process of either group is left stopped."""
    with subreaper():
        for how, signum in (("stop", signal.SIGINT), ("kill", signal.SIGKILL)):
            procs, (pid, entry), state = frozen_pair(tmp_path, how)
            launcher = next(proc for proc in procs.values() if proc.pid == int(pid))
            assert stopped_in_group(entry["child"]), how
            os.kill(launcher.pid, signum)
            launcher.communicate(timeout=30)
            assert launcher.returncode == (128 + signal.SIGINT if how == "stop" else -signal.SIGKILL), how
            deadline = time.time() + 15
            while stopped_in_group(entry["child"]) and time.time() < deadline:
                time.sleep(0.1)
            assert stopped_in_group(entry["child"]) == [], (how, events(state))
            for proc in procs.values():
                if proc is not launcher:
                    out = proc.communicate(timeout=60)[0]
                    assert proc.returncode == 0, out
            assert ledger(state) == {}, how


def test_a_build_near_its_limit_never_freezes_another_builds_compiles(tmp_path):
    """Two builds on one ledger (the node's one queue), each in its own cgroup: A at 300 MiB with two compiles that
    grow to 200 MiB, B at 1,000 MiB with one that starts last. A's pressure freezes one of A's compiles - never B's,
    whose cgroup has room (one decision over both, against the smaller budget, froze B's youngest compile first)."""
    src, state = tmp_path / "src", tmp_path / "state"
    sources(src, a1=(200, 6), a2=(200, 6), b1=(200, 6))
    common = dict(state_dir=str(state), peaks_path=str(tmp_path / "peaks.json"), root=str(src), cpus=4, settle_seconds=0.3)
    small = write_config(tmp_path / "a.json", **common)
    large = write_config(tmp_path / "b.json", **common)
    with memory_cgroup("fair-a", 300) as group_a, memory_cgroup("fair-b", 1000) as group_b:
        procs = [launch(small, src, name, tmp_path, group_a) for name in ("a1.c", "a2.c")]
        deadline = time.time() + 30
        while len(events(state, "start")) < 2 and time.time() < deadline:
            time.sleep(0.05)
        procs.append(launch(large, src, "b1.c", tmp_path, group_b))
        outs = [proc.communicate(timeout=180)[0] for proc in procs]
        outcome = failures(procs, outs, group_a, group_b)
    assert outcome == ([], [0, 0]), (outs, events(state))
    relieved = events(state, "freeze") + events(state, "evict")
    assert relieved and all(row["source"].startswith("a") for row in relieved), events(state)
    assert ledger(state) == {}


def test_the_live_view_counts_the_compiles_of_its_own_build(tmp_path):
    """Issue 35 item 9: guarded_build's status says how many of its compiles really run, wait or are frozen (the
    build view's JOBS cell: "1 of 8"), read from the node's ledger for its own session - the build's holder leads a
    session of its own, and ninja starts each step in a process group of its own, as this leader does (the real tree
    through the role read 0 running while two compiled, when the build's process group was asked). Another build's
    launchers on the same ledger are not counted."""
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build._admission_setup import compiles_of_build
    src, state = tmp_path / "src", tmp_path / "state"
    sources(src, a=(20, 3), b=(20, 3), c=(20, 3))
    config = write_config(tmp_path / "c.json", state_dir=str(state), peaks_path=str(tmp_path / "peaks.json"),
                          root=str(src), cpus=1)
    steps = [[sys.executable, ADMISSION, "--config=" + config, "--", sys.executable, HOGCC, "cc", "-c", str(src / name),
              "-o", str(tmp_path / (name + ".o"))] for name in ("a.c", "b.c", "c.c")]
    ninja = ("import os, subprocess, sys\n"
             "steps = [subprocess.Popen(argv, preexec_fn=os.setpgrp, stdout=subprocess.DEVNULL) for argv in %r]\n"
             "sys.exit(max(step.wait() for step in steps))\n" % (steps,))
    leader = subprocess.Popen([sys.executable, "-c", ninja], start_new_session=True)   # the holder's session
    try:
        deadline, counts = time.time() + 30, None
        while time.time() < deadline:
            counts = compiles_of_build({"state_dir": str(state)}, leader.pid)
            if counts["running"] == 1 and counts["waiting"] == 2:
                break
            time.sleep(0.05)
        assert counts == {"running": 1, "frozen": 0, "waiting": 2}, counts
        assert compiles_of_build({"state_dir": str(state)}, os.getsid(0)) == {"running": 0, "frozen": 0, "waiting": 0}
        assert compiles_of_build(None, leader.pid) is None
        assert leader.wait(timeout=120) == 0
    finally:
        from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import kill_session
        kill_session(leader.pid)   # the whole session: each step leads a process group of its own
        leader.wait()
