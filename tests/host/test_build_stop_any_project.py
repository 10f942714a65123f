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


def status(project):
    try:
        with open(str(project / "out" / "gpufleet-build.status.json")) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


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
        left = status(project)
        for pid, kill in ((left.get("build_pgid"), os.killpg), (left.get("module_pid"), os.kill)):
            if pid:
                try:
                    kill(pid, signal.SIGKILL)
                except OSError:
                    pass
