# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_build_process: the holder reports the build's exit status, keeps the build in its own session, and goes
away by itself when the module does (real processes)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import threading
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import (
    MARKER_VARIABLE,
    BuildProcess,
    dead_runs_marker,
    kill_marked,
    kill_session,
    owner_alive,
    process_start_time,
    start_time_of,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._confinement import Confinement


def start(tmp_path, command):
    log = open(str(tmp_path / "log"), "ab")
    return BuildProcess(command, Confinement("u", 1, 0), str(tmp_path), dict(os.environ), log), log


def wait_end(build, seconds=20):
    deadline = time.time() + seconds
    while not build.wait(0.1):
        assert time.time() < deadline
    return build.rc


def test_exit_status_is_reported_and_the_holder_waits_to_be_released(tmp_path):
    build, log = start(tmp_path, ["/bin/sh", "-c", "echo out; exit 3"])
    assert wait_end(build) == 3 and build.started
    assert build.process.poll() is None, "the holder stays until released (a systemd scope stays readable)"
    assert build.release() == 3
    log.close()
    assert (tmp_path / "log").read_text() == u"out\n"


def test_a_signal_death_reads_as_128_plus_the_signal(tmp_path):
    build, log = start(tmp_path, ["/bin/sh", "-c", "kill -9 $$"])
    assert wait_end(build) == 137
    build.release()
    log.close()


def test_the_build_runs_in_its_own_session_and_kill_ends_the_whole_group(tmp_path):
    build, log = start(tmp_path, ["/bin/sh", "-c", "sleep 60 & sleep 60; wait"])
    assert build.pgid == os.getpgid(build.process.pid) != os.getpgid(0)
    time.sleep(0.3)
    build.kill()
    assert wait_end(build) == 137  # the holder reports the build's SIGKILL ...
    assert build.process.poll() is None, "the holder, the guard of what the build left, was killed with it"
    assert build.release() == 137  # ... and ends with the rest once released
    log.close()
    assert not _group_survivors(build.pgid), "SIGKILL reached every process of the build's group"


def test_a_kill_before_the_holder_started_the_build_still_ends_it(tmp_path):
    """A stop asked while the holder is still starting (a loaded node): the build it starts next is ended."""
    build, log = start(tmp_path, ["/bin/sh", "-c", "sleep 60"])
    build.kill()  # at once: the holder has not started the build yet
    assert wait_end(build) == 137
    assert build.release() == 137
    log.close()
    assert not _group_survivors(build.pgid)


def _group_survivors(pgid, seconds=5):
    """Live members of ``pgid``, polled: SIGKILL is delivered asynchronously, a loaded node takes a moment."""
    deadline = time.time() + seconds
    while True:
        left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _live_in_group(pid, pgid)]
        if not left or time.time() > deadline:
            return left
        time.sleep(0.05)


def _live_in_group(pid, pgid):
    """In process group ``pgid`` and not a zombie (killed children wait for init to reap them)."""
    try:
        with open("/proc/%s/stat" % pid) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (IOError, OSError):
        return False
    return int(fields[2]) == pgid and fields[0] != "Z"


def test_the_build_gets_no_stdin_and_not_the_report_pipe(tmp_path):
    build, log = start(tmp_path, ["/bin/sh", "-c", "read x; echo \"read=$? x=$x\"; ls /proc/self/fd | wc -l"])
    assert wait_end(build) == 0
    build.release()
    log.close()
    lines = (tmp_path / "log").read_text().splitlines()
    assert lines[0] == "read=1 x=", "stdin is /dev/null, not the holder's release pipe"
    assert int(lines[1]) <= 4, "stdin, stdout, stderr and ls's own directory fd only"


def test_kill_reaches_steps_in_process_groups_of_their_own(tmp_path):
    """ninja runs each step in a process group of its own: a killpg of the build's group would miss them."""
    step = "import os, time; os.setpgid(0, 0); open('ready', 'w').close(); time.sleep(60)"
    build, log = start(tmp_path, ["python3", "-c", step])
    deadline = time.time() + 20
    while not (tmp_path / "ready").exists():
        assert time.time() < deadline
        time.sleep(0.05)
    stepping = [pid for pid in os.listdir("/proc") if pid.isdigit() and _live_in_group(pid, int(pid))
                and _session(pid) == build.pgid]
    assert stepping, "the step leads a group of its own inside the build's session"
    build.kill()
    wait_end(build)
    build.release()
    log.close()
    for pid in stepping:
        assert not _group_survivors(int(pid)), "the step's own group was killed too"


def _session(pid):
    try:
        with open("/proc/%s/stat" % pid) as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[3])
    except (IOError, OSError):
        return None


def _alive(word):
    """Live (not zombie) processes whose argv holds ``word``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                argv = handle.read().split(b"\0")
            with open("/proc/%s/stat" % pid) as handle:
                zombie = handle.read().rsplit(")", 1)[1].split()[0] == "Z"
        except (IOError, OSError):
            continue
        if word.encode() in argv and not zombie:
            found.append(int(pid))
    return found


def _gone(word, seconds=10):
    deadline = time.time() + seconds
    while _alive(word) and time.time() < deadline:
        time.sleep(0.05)
    return not _alive(word)


def test_the_build_dies_with_its_module(tmp_path):
    """Finding 2: the module's end (its side of the holder's stdin closes: SIGKILL, async limit, OOM killer) ends
    the build under every confinement, so nothing runs on unguarded."""
    build, log = start(tmp_path, ["/bin/sh", "-c", "sleep 5201"])
    try:
        deadline = time.time() + 10
        while not _alive("5201"):
            assert time.time() < deadline
            time.sleep(0.05)
        build.process.stdin.close()  # what the module's death does
        assert _gone("5201"), "the build ran on after its module was gone"
        assert build.process.wait(timeout=10) == 137
    finally:
        kill_session(build.pgid)
        log.close()


def test_nothing_the_build_started_outlives_its_release(tmp_path):
    """Finding 3: a background job, a setsid daemon and a double-forked one outlived a successful build (and kept
    the inherited lock). The holder is their subreaper and ends them; nothing inherits a lock."""
    marker = "%s=test-%d" % (MARKER_VARIABLE, os.getpid())
    env = dict(os.environ)
    env[MARKER_VARIABLE] = marker.split("=", 1)[1]
    log = open(str(tmp_path / "log"), "ab")
    build = BuildProcess(["/bin/sh", "-c", "sleep 5202 & setsid sleep 5203 & (setsid sh -c 'sleep 5204 &' &); true"],
                         Confinement("u", 1, 0), str(tmp_path), env, log, marker)
    try:
        assert wait_end(build) == 0
        assert build.release() == 0
        for word in ("5202", "5203", "5204"):
            assert _gone(word, 5), "%s outlived the build" % word
    finally:
        for word in ("5202", "5203", "5204"):
            for pid in _alive(word):
                os.kill(pid, 9)
        log.close()


def test_kill_marked_ends_only_the_runs_marked_processes(tmp_path):
    marker = "%s=run-%d" % (MARKER_VARIABLE, os.getpid())
    marked = subprocess.Popen(["sleep", "5205"], env={MARKER_VARIABLE: marker.split("=", 1)[1]},
                              start_new_session=True)
    other = subprocess.Popen(["sleep", "5206"], env={MARKER_VARIABLE: "another-run"}, start_new_session=True)
    try:
        assert kill_marked("") == [] and kill_marked("no-variable") == [], "an empty marker would match everything"
        assert kill_marked(marker) == [marked.pid]
        assert marked.wait(timeout=10) == -9 and other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_kill_marked_looks_again_at_a_process_caught_inside_its_exec(tmp_path):
    """CI caught ``kill_marked`` between a child's exec succeeding and the kernel laying out its environment: the
    child read as an empty environment and was missed. Here that moment lasts 0.2 s: a /proc entry for a real
    child whose environment appears late."""
    marker = "%s=run-exec-%d" % (MARKER_VARIABLE, os.getpid())
    child = subprocess.Popen(["sleep", "5207"], start_new_session=True)
    entry = tmp_path / str(child.pid)
    entry.mkdir()
    (entry / "stat").write_text("%d (sleep) S 1 %d %d 0 -1 4194304 0 0" % (child.pid, child.pid, child.pid))
    (entry / "environ").write_bytes(b"")
    quiet = tmp_path / "quiet"  # a kernel thread and a zombie: no environment ever, and not waited for
    for pid, stat in ((999999998, "I 2 0 0 0 -1 %d 0 0" % 0x00200000), (999999999, "Z 1 0 0 0 -1 0 0 0")):
        (quiet / str(pid)).mkdir(parents=True)
        (quiet / str(pid) / "stat").write_text("%d (x) %s" % (pid, stat))
        (quiet / str(pid) / "environ").write_bytes(b"")
    laid_out = threading.Timer(0.2, (entry / "environ").write_bytes, [marker.encode() + b"\0"])
    try:
        laid_out.start()
        assert kill_marked(marker, proc=str(tmp_path)) == [child.pid]
        assert child.wait(timeout=10) == -9
        started = time.monotonic()
        assert kill_marked(marker, proc=str(quiet), settle_seconds=5) == []
        assert time.monotonic() - started < 2, "a kernel thread's or a zombie's empty environment is not waited on"
    finally:
        laid_out.cancel()
        child.kill()
        child.wait()


def test_a_process_is_known_by_pid_and_start_time():
    me = process_start_time(os.getpid())
    assert me and owner_alive(os.getpid(), me)
    assert not owner_alive(os.getpid(), me + 1), "a reused pid has another start time"
    assert not owner_alive(999999999, me) and not owner_alive(None, None) and not owner_alive("x", "y")
    assert start_time_of("1 (a b) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0") == 4242


def test_only_a_dead_runs_marker_from_a_file_is_acted_on():
    me = process_start_time(os.getpid())
    assert dead_runs_marker("%s=run:999999999:1" % MARKER_VARIABLE)
    assert not dead_runs_marker("%s=run:%d:%d" % (MARKER_VARIABLE, os.getpid(), me)), "a live run's marker"
    for planted in ("PATH=/usr/bin", "%s=" % MARKER_VARIABLE, "%s=x" % MARKER_VARIABLE, None, 5, ["x"],
                    "%s=:1:2" % MARKER_VARIABLE, "%s=run:\u00b2:1" % MARKER_VARIABLE, "%s=run:1:\u0661" % MARKER_VARIABLE):
        assert not dead_runs_marker(planted), planted


def test_orphans_that_end_are_reaped_while_the_build_runs_and_its_status_is_still_read(tmp_path):
    """The real tree's cold build left an evicted compile's nvcc, sh and cicc as zombies of the holder (their
    subreaper) until the build ended; the build's own exit status must still be the one reported."""
    build, log = start(tmp_path, ["/bin/sh", "-c", "(sleep 0.2 &) ; sleep 9; exit 4"])
    holder = build.process.pid

    def zombies():
        found = []
        for name in os.listdir("/proc"):
            try:
                with open("/proc/%s/stat" % name) as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except (IOError, OSError):
                continue
            if fields[0] == "Z" and int(fields[1]) == holder:
                found.append(int(name))
        return found

    deadline = time.time() + 8
    while time.time() < deadline and not build.wait(0.2):
        if time.time() > deadline - 1:
            break
    assert zombies() == [], "an orphan that ended stays a zombie of the holder while the build runs"
    assert wait_end(build) == 4
    build.release()
    log.close()
