# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission launcher against what a hostile review broke (issue 28 items 2-4), with real processes: a signal to
a waiting launcher, planted bad entries, FIFOs and symlinks in its state folder, a SIGKILLed launcher."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
import sys
import time

from conftest import PROJECTS, REPO

ADMISSION = os.path.join(REPO, "plugins", "module_utils", "_build", "_admission.py")
HOGCC = os.path.join(PROJECTS, "standin_mixed_memory", "hogcc.py")
MIB = 1024 ** 2
sys.path.insert(0, os.path.dirname(ADMISSION))
import _admission  # noqa: E402 pylint: disable=wrong-import-position


def setup(tmp_path, budget_mib=500, **extra):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    config = tmp_path / "config.json"
    settings = {"state_dir": str(state), "peaks_path": str(tmp_path / "peaks.json"), "root": str(src),
                "budget_bytes": budget_mib * MIB, "reserve_bytes": 0, "default_bytes": 100 * MIB,
                "poll_seconds": 0.05, "sample_seconds": 0.2}
    settings.update(extra)
    config.write_text(json.dumps(settings))
    return src, state, config


def launch(tmp_path, config, src, name, mib=0, seconds=0):
    (src / name).write_text("/* gpufleet-hog: %d %s */\nint f(void) { return 1; }\n" % (mib, seconds))
    return subprocess.Popen([sys.executable, ADMISSION, "--config=" + str(config), "--", sys.executable, HOGCC, "cc",
                             "-c", str(src / name), "-o", str(tmp_path / (name + ".o"))],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)


def ledger(state):
    try:
        return json.loads((state / "ledger.json").read_text())
    except (OSError, ValueError):
        return {}


def wait_until(predicate, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_signal_to_a_waiting_launcher_never_deadlocks(tmp_path):
    """The old handler flocked the ledger again while the interrupted code held it: the launcher waited on itself.
    A large entry of a live process (this test) makes the launcher hold the lock most of the time it waits."""
    src, state, config = setup(tmp_path, budget_mib=100)
    blocker = {"state": "running", "bytes": 100 * MIB, "source": "x" * (8 * MIB), "since": time.time()}
    (state / "ledger.json").write_text(json.dumps({str(os.getpid()): blocker}))
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        proc = launch(tmp_path, config, src, "waits.c")
        assert wait_until(lambda: str(proc.pid) in ledger(state)), proc.pid
        time.sleep(0.3)
        proc.send_signal(signum)
        try:
            out = proc.communicate(timeout=20)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("a waiting launcher hung on signal %d" % signum)
        assert proc.returncode == 128 + signum, (proc.returncode, out)
        assert list(ledger(state)) == [str(os.getpid())]


def test_bad_peaks_and_ledger_entries_are_never_seen(tmp_path):
    src, state, config = setup(tmp_path, budget_mib=1024)
    bad = {"n.c": 5, "l.c": [1, 2], "nan.c": {"peak_bytes": float("nan")}, "inf.c": {"peak_bytes": float("inf")},
           "h.c": {"peak_bytes": "4GiB"}, "s.c": {"peak_bytes": MIB, "seconds": "12"},
           "neg.c": {"peak_bytes": -690 * MIB, "seconds": 1}}
    (tmp_path / "peaks.json").write_text(json.dumps(bad))
    # a negative reservation in the ledger would lift the budget for everything else; a number is no entry at all
    busy = subprocess.Popen(["sleep", "60"])
    try:
        (state / "ledger.json").write_text(json.dumps({
            "1": 5, str(busy.pid): {"state": "running", "bytes": -690 * MIB, "since": 1},
            "x": {"state": "running", "bytes": 1, "since": 1}}))
        for name in sorted(bad):
            proc = launch(tmp_path, config, src, name)
            out = proc.communicate(timeout=60)[0]
            assert proc.returncode == 0, (name, out)
            assert "Traceback" not in out and os.path.exists(str(tmp_path / (name + ".o"))), out
        assert ledger(state) == {}
        learned = json.loads((tmp_path / "peaks.json").read_text())
        assert all(_admission.policy.valid_peak(learned[name]) for name in bad), learned
    finally:
        busy.kill()
        busy.wait()


def test_fifos_as_state_files_never_hang(tmp_path):
    src, state, config = setup(tmp_path)
    os.mkfifo(str(tmp_path / "peaks.json"))
    os.mkfifo(str(state / "ledger.json"))
    proc = launch(tmp_path, config, src, "fifo.c")
    try:
        out = proc.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("a FIFO as peaks.json / ledger.json hung the launcher")
    assert proc.returncode == 0, out
    assert os.path.isfile(str(tmp_path / "peaks.json")) and ledger(state) == {}


def test_a_fifo_or_symlink_as_the_lock_is_refused_not_followed(tmp_path):
    src, state, config = setup(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(str(victim), str(state / "ledger.lock"))
    proc = launch(tmp_path, config, src, "link.c")
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode != 0 and "ledger.lock" in out and "Traceback" not in out, out
    assert victim.read_text() == "keep"


def test_the_temp_file_is_never_written_through_a_symlink(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    target = tmp_path / "ledger.json"
    for name in ("ledger.json.%d.tmp" % os.getpid(), "ledger.json.tmp"):
        os.symlink(str(victim), str(tmp_path / name))
    _admission.node.save_json(str(target), {"a": 1})
    assert victim.read_text() == "keep" and json.loads(target.read_text()) == {"a": 1}


def test_a_sigkilled_launcher_takes_its_compiler_and_frees_its_reservation(tmp_path):
    src, state, config = setup(tmp_path)
    proc = launch(tmp_path, config, src, "long.c", mib=50, seconds=30)
    found = wait_until(lambda: (ledger(state).get(str(proc.pid)) or {}).get("child"))
    child = (ledger(state).get(str(proc.pid)) or {}).get("child")
    hogcc = [pid for pid, ppid in _admission.node.parent_pids().items() if ppid == proc.pid]
    proc.kill()
    proc.wait()
    try:
        assert found and hogcc == [child], (ledger(state), hogcc)
        # the compiler (hogcc holding 50 MiB for 30 s) dies with it, so its reservation is reclaimed at once
        assert wait_until(lambda: not _admission.node.pid_alive(child), 5), "the compiler outlived its SIGKILLed launcher"
    finally:
        for pid in hogcc:
            if _admission.node.pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
    quick = launch(tmp_path, config, src, "next.c")
    assert quick.communicate(timeout=30)[0] is not None and quick.returncode == 0
    assert ledger(state) == {}
