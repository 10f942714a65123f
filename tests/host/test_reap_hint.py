# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reap hint loop (issue 39): a live build process (its parent still runs) fails the preflight with "end them with
playbooks/reap.yml"; reap, which ends only orphans by default, ended nothing, said "still running: 0", and the same
hint came back. Both messages now name reap_orphaned_only=false, and the hint names the playbook as an installed
collection runs it. On this host: a copy of sleep named ninja, a child of this test (live, not orphaned); reap runs in
check mode only (it kills nothing on a shared machine)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture
def live_ninja(tmp_path):
    ninja = tmp_path / "ninja"
    shutil.copy(shutil.which("sleep"), str(ninja))
    proc = subprocess.Popen([str(ninja), "300"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def playbook(tmp_path, name, *extra):
    argv = ["ansible-playbook", "playbooks/%s.yml" % name, "-e", "preflight_report_dir=%s" % tmp_path,
            "-e", '{"preflight_profiles": []}', "-e", "preflight_min_available_memory=1MiB",
            "-e", "preflight_max_memory_pressure=100"] + list(extra)
    return subprocess.run(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1"), check=False, timeout=300)


def test_a_live_build_is_sent_to_reap_with_reap_orphaned_only_false(tmp_path, live_ninja):
    run = playbook(tmp_path, "preflight")
    assert run.returncode == 2, run.stdout
    with open(str(tmp_path / "preflight.json")) as handle:   # (other builds on a shared machine may be listed too)
        assert live_ninja in [proc["pid"] for proc in json.load(handle)["hosts"]["localhost"]["processes"]]
    assert "end them with ansible-playbook gpufleet.preflight.reap -e reap_orphaned_only=false" in run.stdout, run.stdout
    assert "playbooks/reap.yml" not in run.stdout


def test_reap_says_it_left_live_builds_alone_and_how_to_end_them(tmp_path, live_ninja):
    run = playbook(tmp_path, "reap", "--check", "-e", "reap_hosts=localhost")
    assert "reap_orphaned_only=true: a build process whose parent still runs" in run.stdout, run.stdout
    assert "-e reap_orphaned_only=false ends those too" in run.stdout, run.stdout
    wider = playbook(tmp_path, "reap", "--check", "-e", "reap_hosts=localhost", "-e", "reap_orphaned_only=false",
                     "-e", "reap_user=%s" % os.environ.get("USER", "root"), "-v")
    assert '"pid": %d' % live_ninja in wider.stdout, wider.stdout[-3000:]
    assert "reap_orphaned_only=true" not in wider.stdout
