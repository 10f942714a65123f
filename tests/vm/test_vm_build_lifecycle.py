# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guarded_build's lifecycle inside a systemd scope, which only a systemd node shows: the module SIGKILLed
mid-build takes the build (and its scope) with it and a rerun is not refused; ``state: stopped`` ends a scoped
build and its status says "stopped"."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import threading
import time

import pytest

from conftest import HUNGRY, HUNGRY_CMD, TIMINGS, WORK, on_every_node

STATUS_NAME = "gpufleet-build.status.json"  # plugins/module_utils/_constants.BUILD_STATUS_NAME


def scopes_of(node, name):
    return node.out("systemctl list-units --all --no-legend --plain 'gpufleet-build-%s-*' | awk '{print $1}'"
                    % name).split()


def marked_pids(node, marker):
    """Pids whose environment carries the run's marker (every process of the build inherits it)."""
    return node.out("grep -lzx -- '%s' /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true" % marker).split()


def read_status(node, chdir):
    proc = node.run("cat %s/build/%s" % (chdir, STATUS_NAME))
    try:
        return json.loads(proc.stdout) if proc.returncode == 0 else {}
    except ValueError:  # caught mid-rename: read again
        return {}


class Background(object):
    """A vms.adhoc call in a thread: the build runs while the test acts on the nodes."""

    def __init__(self, vms, pattern, module, args):
        self.results = None
        self.error = None

        def run():
            try:
                self.results = vms.adhoc(pattern, module, args, timeout=600)
            except Exception as exc:  # pylint: disable=broad-except
                self.error = exc
        self.thread = threading.Thread(target=run)
        self.thread.start()

    def join(self, timeout=300):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the ansible run did not end"
        assert self.error is None, self.error
        return self.results


def start_long_builds(vms, seconds_by_name):
    """Builds of 6 steps x <seconds> at -j2, started on both VMs side by side (one configure's wait for all);
    returns {name: (background, {node: status}, args)} once each node's build is running in its scope with
    compile steps (hog) alive."""
    started, running = {}, {}
    for name, seconds in sorted(seconds_by_name.items()):
        chdir = "%s/%s" % (WORK, name)
        for node in vms.nodes.values():
            node.put_tree(HUNGRY, chdir)
        args = {"cmd": HUNGRY_CMD.format(mib=8, seconds=seconds, steps=6, ramp=0), "chdir": chdir, "name": name,
                "jobs": 2, "memory_limit": "300MiB", "memory_per_thread": "16MiB"}
        started[name] = (Background(vms, "all", "gpufleet.preflight.guarded_build", args), args)
        running[name] = {}
    deadline = time.time() + 300
    while any(len(found) < len(vms.nodes) for found in running.values()) and time.time() < deadline:
        for name, (background, args) in started.items():
            assert background.thread.is_alive(), "the build %s ended before it could be interrupted: %s" % (
                name, background.results or background.error)
            for node_name, node in vms.nodes.items():
                if node_name in running[name]:
                    continue
                status = read_status(node, args["chdir"])
                if status.get("state") == "running" and marked_hogs(node, status.get("build_marker")):
                    running[name][node_name] = status
        time.sleep(1)
    for name, found in running.items():
        assert len(found) == len(vms.nodes), "%s: no running build on %s" % (name, sorted(set(vms.nodes) - set(found)))
    return dict((name, (started[name][0], running[name], started[name][1])) for name in started)


def marked_hogs(node, marker):
    """The build's compile steps (hog) that carry its marker."""
    if not marker:
        return []
    return node.out("for p in $(pgrep -x hog); do grep -qzx -- '%s' /proc/$p/environ 2>/dev/null && echo $p; done; true"
                    % marker).split()


@pytest.fixture(scope="module")
def long_builds(vms):
    """The build the first test kills (20 s steps) and the one the second stops (40 s steps: it must still run
    while the first test ends), started together."""
    builds = start_long_builds(vms, {"killed": 20, "stopme": 40})
    yield builds
    for background, dummy, dummy in builds.values():
        background.thread.join(600)


def wait_gone(node, name, marker, seconds=60):
    """Until the build's scopes and marked processes are gone; what is left (empty when all went)."""
    deadline = time.time() + seconds
    while True:
        left = {"scopes": scopes_of(node, name), "processes": marked_pids(node, marker),
                "cgroups": node.out("ls -d /sys/fs/cgroup/system.slice/gpufleet-build-%s-* 2>/dev/null || true"
                                    % name).split()}
        if not any(left.values()) or time.time() > deadline:
            return dict((k, v) for k, v in left.items() if v)
        time.sleep(0.5)


def test_module_killed_mid_build_takes_the_scoped_build_with_it(vms, long_builds):
    """SIGKILL to the module (an async limit, the OOM killer, a lost controller) while its build runs in a systemd
    scope: the holder sees its stdin close and ends the build; systemd collects the empty scope; the lock dies with
    the module, so a rerun is not refused and ends the abandoned status."""
    started = time.time()
    background, running, args = long_builds["killed"]
    for name, node in sorted(vms.nodes.items()):
        status = running[name]
        assert status["confinement"] == "systemd", status["confinement"]  # the strategy, by name
        assert scopes_of(node, "killed"), "%s: the build runs in no scope" % name
        assert marked_pids(node, status["build_marker"]), "%s: no process carries %s" % (name, status["build_marker"])
        node.out("kill -KILL %d" % status["module_pid"])
    results = background.join()

    def check(name, node):
        status = running[name]
        assert results[name]["_status"] == "FAILED", results[name]
        left = wait_gone(node, "killed", status["build_marker"])
        assert not left, "left behind after the module's SIGKILL: %s" % left
        assert not marked_hogs(node, status["build_marker"]), "a compile step outlived the module"

    on_every_node(vms.nodes, check)

    # the rerun (a short build in the same build directory) is not refused by a lock, and ends the stale status
    rerun = vms.adhoc("all", "gpufleet.preflight.guarded_build",
                      dict(args, cmd=HUNGRY_CMD.format(mib=8, seconds=0, steps=2, ramp=0)))
    for name in sorted(vms.nodes):
        result = rerun[name]
        assert result["_status"] == "CHANGED", result.get("msg") or result
        assert result.get("stale_status"), "the rerun says nothing of the abandoned run: %s" % result
        assert read_status(vms.nodes[name], args["chdir"])["state"] == "succeeded"
    TIMINGS["module_killed_test_seconds_with_both_starts"] = time.time() - started


def test_state_stopped_ends_a_scoped_build(vms, long_builds):
    """``state: stopped`` from a second run: the owner ends its build and scope, releases the lock and marks the
    status "stopped"; the first run fails saying so."""
    started = time.time()
    background, running, args = long_builds["stopme"]
    assert background.thread.is_alive(), "the build to stop ended first: %s" % (background.results or background.error)
    stop = vms.adhoc("all", "gpufleet.preflight.guarded_build",
                     {"chdir": args["chdir"], "state": "stopped", "stop_timeout": 60})
    results = background.join()

    def check(name, node):
        status = running[name]
        assert stop[name]["_status"] == "CHANGED", stop[name]
        assert stop[name]["run_id"] == status["run_id"] and stop[name]["module_pid"] == status["module_pid"]
        assert results[name]["_status"] == "FAILED", results[name]
        assert results[name].get("stopped") is True and "stopped" in results[name]["msg"], results[name]
        final = read_status(node, args["chdir"])
        assert final["state"] == "stopped" and final["run_id"] == status["run_id"], final
        left = wait_gone(node, "stopme", status["build_marker"], seconds=30)
        assert not left, "left behind after state: stopped: %s" % left
        assert not marked_hogs(node, status["build_marker"]), "a compile step outlived the stop"

    on_every_node(vms.nodes, check)
    again = vms.adhoc("all", "gpufleet.preflight.guarded_build",
                      {"chdir": args["chdir"], "state": "stopped", "stop_timeout": 60})
    for name in sorted(vms.nodes):
        assert again[name]["_status"] == "SUCCESS", again[name]
    TIMINGS["state_stopped_test_seconds"] = time.time() - started
