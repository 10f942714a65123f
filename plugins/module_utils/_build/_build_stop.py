# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guarded_build ``state: stopped``: stop a build through its owner, the module run that holds its lock.

Only a proven owner of this build is ever signalled: the lock's record in the registry (``_build_state.BuildLock``;
``/run/gpufleet-build``, root's alone), verified by pid and start time (a reused pid is never signalled). The
status file is no proof: it lives in the build dir, which its owner and the tree's own build commands can write, so
a status naming a live process is reported, never acted on (issue 28 item 1). A build dir or status directory of
another user, or one everyone may write, is refused for a stop as for a build. SIGTERM makes the owner end its
build (session, descendants, cgroup), release the lock and mark the status "stopped"; this waits for that, bounded.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_state as state
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_engine import BuildError
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_options import check_stop_options
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import dead_runs_marker, kill_marked, owner_alive


def stop_build(build, timeout, check_mode=False, poll=0.1):
    """``state: stopped`` for ``build`` (a GuardedBuild, located): the proven owner of the build directory (the
    lock's record in the registry, verified by pid and start time) gets SIGTERM - it ends its build, removes its
    cgroup, releases the lock and marks the status "stopped" - and this waits (``timeout`` s) until it did. A status
    left "running" by a dead owner is marked stopped and what carries its (dead run's) marker is ended. The result
    dict; BuildError when the owner does not stop in time, when a status names a live process the lock does not
    prove the owner (nothing is signalled), or for a build dir of another user."""
    try:
        check_stop_options(build.params)
    except ValueError as exc:
        raise BuildError(str(exc))
    build.locate()
    result = {"changed": False, "build_dir": build.build_dir, "status_path": build.status_path,
              "stamp_path": build.stamp_path, "status": build.status_path, "stamp": build.stamp_path, "run_id": None}
    check_stop_directories(build)
    owner = proven_owner(build.build_dir)
    status, problem = state.read_json_object(build.status_path, "status file")
    if problem:
        build.warnings.append(problem)
    if owner is None and unproven_claim(status):
        raise BuildError(
            "refusing to signal module pid %s: the status %s says run %s is %r and that pid runs, but the lock "
            "registry (%s) shows no live holder of %s - a status file is no proof of ownership (its directory's "
            "owner and the build's own commands can write it). Nothing was signalled; if that process is a build "
            "of this directory, stop it where it runs" % (
                status.get("module_pid"), build.status_path, status.get("run_id"), status.get("state"),
                state.registry_directory(), build.build_dir), result)
    if owner is not None:
        pid, run_id = owner["module_pid"], owner.get("run_id")
        what = "run %s (module pid %s) building in %s" % (run_id, pid, build.build_dir)
        result.update(changed=True, run_id=run_id, module_pid=pid)
        if check_mode:
            result["msg"] = "would stop %s" % what
            return result
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + timeout
        while owner_alive(pid, owner.get("module_start_time")):
            current = state.read_json_object(build.status_path, "status file")[0] or {}
            if current.get("run_id") == run_id and current.get("state") == "stopped":
                break
            if time.time() > deadline:
                raise BuildError("%s did not stop within %s s of SIGTERM" % (what, timeout), result)
            time.sleep(poll)
        status = state.read_json_object(build.status_path, "status file")[0]
        if isinstance(status, dict) and status.get("run_id") == run_id and status.get("state") != "stopped":
            _mark_stopped(build.status_path, status, "its module (pid %s) ended without marking it" % pid)
        result["msg"] = "stopped %s" % what
        return result
    if isinstance(status, dict) and status.get("state") in state.ACTIVE_STATES:
        what = "the status of run %s (module pid %s, no longer running) still says %r" % (
            status.get("run_id"), status.get("module_pid"), status.get("state"))
        result.update(changed=True, run_id=status.get("run_id"))
        if check_mode:
            result["msg"] = "%s: would mark it stopped and end its leftovers" % what
            return result
        marker = status.get("build_marker")
        killed = kill_marked(marker) if dead_runs_marker(marker) else []
        _mark_stopped(build.status_path, status, "abandoned: its module no longer runs")
        result["msg"] = "%s: marked it stopped (abandoned), ended %d leftover process(es)" % (what, len(killed))
        return result
    result["msg"] = "nothing is running in %s" % build.build_dir
    return result


def check_stop_directories(build):
    """BuildError unless the build dir and the status's directory, where they exist, are ours and not writable by
    everyone: the same rule as for a build (``_build_state.check_directory``)."""
    for option, path in (("build_dir", build.build_dir), ("status_path", os.path.dirname(build.status_path))):
        if not os.path.lexists(path):
            continue
        try:
            state.check_directory(path, option)
        except state.StateError as exc:
            raise BuildError("%s; nothing was stopped" % exc)


def proven_owner(build_dir, directory=None):
    """The lock record of ``build_dir``'s live holder, or None: read from our own registry (checked like any state
    directory), naming this build dir, its module alive by pid and start time."""
    lock = state.BuildLock(build_dir, directory)
    if not os.path.isdir(lock.directory):
        return None
    try:
        state.check_directory(lock.directory, "the lock directory")
    except state.StateError as exc:
        raise BuildError("%s; nothing was stopped" % exc)
    record = lock.holder()
    if not isinstance(record, dict) or record.get("build_dir") != lock.build_dir:
        return None
    if not owner_alive(record.get("module_pid"), record.get("module_start_time")):
        return None
    return record


def unproven_claim(status):
    """Whether a status says a live process runs this build (what only the lock may prove)."""
    return isinstance(status, dict) and status.get("state") in state.ACTIVE_STATES and owner_alive(
        status.get("module_pid"), status.get("module_start_time"))


def _mark_stopped(path, status, why):
    status = dict(status, state="stopped", message="stopped: %s" % why, updated_at=time.time())
    try:
        state.write_json_atomic(path, status)
    except state.StateError:
        pass
