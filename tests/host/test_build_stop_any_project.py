# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stopping your own (not sgl-kernel) guarded build with playbooks/build_stop.yml (issue 39): it needed the
sgl_kernel_* variables, an empty sgl_kernel_subdir among them; build_stop_chdir (and build_stop_build_dir) say where
any guarded_build project builds. A real guarded build on this host, started detached as a user's play would."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
START = """
- name: Start my own build
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Build it, detached
      gpufleet.preflight.guarded_build:
        cmd: sleep 60
        chdir: "{{ project }}"
        build_dir: out
      async: 120
      poll: 0
"""


def playbook(path, *extra):
    return subprocess.run(["ansible-playbook", path] + list(extra), cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, env=dict(os.environ, ANSIBLE_NOCOLOR="1"),
                          check=False, timeout=300)


def status(project, build_dir="out"):
    try:
        with open(str(project / build_dir / "gpufleet-build.status.json")) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def kill_leftovers(left):
    """What a failed test left running: the build's process group and the module, by the status file's pids."""
    for pid, kill in ((left.get("build_pgid"), os.killpg), (left.get("module_pid"), os.kill)):
        if pid:
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_build_stop_chdir_stops_any_guarded_build(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "start.yml").write_text(START)
    started = playbook(str(tmp_path / "start.yml"), "-e", "project=%s" % project)
    assert started.returncode == 0, started.stdout
    try:
        deadline = time.monotonic() + 60
        while status(project).get("state") != "running" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert status(project).get("state") == "running", status(project)
        stop = playbook("playbooks/build_stop.yml", "-e", "build_stop_hosts=localhost",
                        "-e", "build_stop_chdir=%s" % project, "-e", "build_stop_build_dir=out")
        assert stop.returncode == 0, stop.stdout
        assert "stopped run %s" % status(project).get("run_id") in stop.stdout, stop.stdout
        assert status(project).get("state") == "stopped", status(project)
    finally:
        kill_leftovers(status(project))


def test_build_watchs_doc_example_does_not_fail_a_node_stopped_on_request(tmp_path):
    """Issue 39: build_watch's EXAMPLES, run as written (a play on this host, the build a sleep, polls every second),
    failed the node whose build build_stop stopped, though a requested stop is no failure."""
    import yaml
    from ansible_collections.gpufleet.preflight.plugins.modules import build_watch

    project = tmp_path / "project"
    project.mkdir()
    tasks = yaml.safe_load(build_watch.EXAMPLES.replace("/srv/build/project", str(project)))
    tasks[0]["gpufleet.preflight.guarded_build"]["cmd"] = "sleep 60"
    tasks[2]["gpufleet.preflight.build_watch"].update(interval=1, report_dir=str(tmp_path / "reports"))
    (tmp_path / "example.yml").write_text(yaml.safe_dump([dict(name="The example", hosts="localhost",
                                                               gather_facts=False, tasks=tasks)]))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    example = subprocess.Popen(["ansible-playbook", str(tmp_path / "example.yml")], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    built = tmp_path / "project"
    try:
        deadline = time.monotonic() + 60
        while status(built, "build").get("state") != "running" and time.monotonic() < deadline:
            time.sleep(0.5)
        stop = playbook("playbooks/build_stop.yml", "-e", "build_stop_hosts=localhost", "-e", "build_stop_chdir=%s" % built)
        assert stop.returncode == 0, stop.stdout
        out = example.communicate(timeout=120)[0]
        assert example.returncode == 0, out
        assert "stopped" in out and "failed=0" in out, out
    finally:
        if example.poll() is None:
            example.kill()
            example.wait()
        kill_leftovers(status(built, "build"))
