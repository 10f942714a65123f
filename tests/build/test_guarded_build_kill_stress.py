# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 28 item 10: a guarded_build module SIGKILLed at any moment, on a loaded machine, leaves no build process
running and no lock held. Twenty runs (watchdog confinement, as in the report) with CPU hogs beside them, each
module killed at another moment - before its lock, while its holder starts, while the build runs - and after each:
nothing carrying the run's word survives, the registry lock is free and the status names no live owner."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

from conftest import REPO, processes_with

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_state as state
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import owner_alive

MODULE = os.path.join(REPO, "plugins", "modules", "guarded_build.py")
RUNS = 20
HOGS = 3
# a build that leaves a background child, a setsid daemon and a double-forked one, then runs on itself
BUILD = "sleep {w} & setsid sleep {w} & (setsid sh -c 'sleep {w} &' &) ; exec sleep {w}"


def live_processes_with(word):
    """Live (not zombie) pids whose command line holds ``word``."""
    return processes_with(word, zombies=False)


def kill_pids(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def lock_is_free(build_dir):
    path = state.BuildLock(build_dir).path
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return True  # released (unlinked), or never taken
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except (IOError, OSError):
        return False
    finally:
        os.close(fd)


def start_hogs():
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for dummy in range(HOGS)]


def test_a_module_killed_at_any_moment_leaves_no_build_and_no_lock(tmp_path):
    hogs = start_hogs()
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, ".tmp", "collections"))
    failures, moments = [], []
    try:
        for run in range(RUNS):
            word = str(52800 + run)
            chdir = tmp_path / str(run)
            chdir.mkdir()
            args = {"cmd": BUILD.format(w=word), "chdir": str(chdir), "name": "stress", "jobs": 1,
                    "memory_limit": "256MiB", "memory_per_thread": "16MiB", "reserve": "16MiB",
                    "confinement": "watchdog", "status_interval": 0.2}
            args_file = tmp_path / ("args-%d.json" % run)
            args_file.write_text(u"%s" % json.dumps({"ANSIBLE_MODULE_ARGS": args}))
            module = subprocess.Popen([sys.executable, MODULE, str(args_file)], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            # the moment: the status's first write (the lock is taken) plus 0 to 380 ms - the holder starting, the
            # build starting, its children forking; runs whose status never came are killed at start-up
            status_path = os.path.join(str(chdir), "build", state.STATUS_NAME)
            deadline = time.time() + 20
            while not os.path.exists(status_path) and time.time() < deadline and module.poll() is None:
                time.sleep(0.005)
            delay = 0.02 * run
            time.sleep(delay)
            building = bool(live_processes_with(word))
            if run % 2:  # a stop (SIGTERM) overtaken by a kill: the module dies while it ends its build
                module.terminate()
                time.sleep(0.005 * (run % 7))
            module.kill()
            module.wait()
            deadline, left = time.time() + 15, live_processes_with(word)
            while left and time.time() < deadline:
                time.sleep(0.1)
                left = live_processes_with(word)
            status = state.read_json(os.path.join(str(chdir), "build", state.STATUS_NAME))
            moments.append((delay, building))
            problems = []
            if left:
                problems.append("build processes survive: %s" % left)
                kill_pids(left)
            if not lock_is_free(os.path.join(str(chdir), "build")):
                problems.append("the lock is still held")
            if isinstance(status, dict) and owner_alive(status.get("module_pid"), status.get("module_start_time")):
                problems.append("the status names a live owner %s" % status.get("module_pid"))
            if problems:
                failures.append("run %d (killed after %.1f s, status %s): %s" % (
                    run, delay, (status or {}).get("state"), "; ".join(problems)))
    finally:
        kill_pids([hog.pid for hog in hogs])
        for hog in hogs:
            hog.wait()
        for run in range(RUNS):
            kill_pids(live_processes_with(str(52800 + run)))
    assert not failures, "\n".join(failures)
    # the loop did reach both sides of the build's start: killed before it ran, and while it ran
    assert set(building for dummy, building in moments) == set([False, True]), moments
