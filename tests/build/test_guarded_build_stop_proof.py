# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 28 item 1, reproduced from outside: an unprivileged user (``nobody``) plants a status naming one of root's
processes; root's ``guarded_build state=stopped`` (what playbooks/build_stop.yml runs) must leave it alone and say
why. Also a status forged in root's own build dir (as the tree's build commands could write it): no lock, no
signal."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import run_module

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import process_start_time

NOBODY = 65534
STATUS = "gpufleet-build.status.json"


@pytest.fixture
def victim():
    """One of root's processes (a ``sleep`` in a session of its own), killed after the test."""
    proc = subprocess.Popen(["sleep", "52991"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def reachable():
    """A directory every user may enter (pytest's tmp_path is root's alone), removed after the test."""
    path = tempfile.mkdtemp(prefix="gpufleet-stop-proof-")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path)


def planted(victim):
    return json.dumps({"state": "running", "run_id": "planted", "module_pid": victim.pid,
                       "module_start_time": process_start_time(victim.pid)})


def as_nobody():
    os.setgid(NOBODY)
    os.setuid(NOBODY)


@pytest.mark.skipif(os.geteuid() != 0, reason="the reproducer needs root and another user")
def test_a_status_planted_by_another_user_never_gets_roots_process_signalled(victim, reachable):
    chdir = os.path.join(reachable, "project")
    os.mkdir(chdir)
    os.chown(chdir, NOBODY, NOBODY)
    script = "mkdir build && printf '%%s' '%s' > build/%s" % (planted(victim), STATUS)
    subprocess.run(["/bin/sh", "-c", script], cwd=chdir, preexec_fn=as_nobody, check=True)
    assert os.stat(os.path.join(chdir, "build", STATUS)).st_uid == NOBODY
    result = run_module({"chdir": chdir, "state": "stopped"}, timeout=120)
    time.sleep(0.3)
    assert victim.poll() is None, "root's process was signalled on another user's word"
    assert result.get("failed"), result["_output"]
    assert "refusing build_dir %s" % os.path.join(chdir, "build") in result["msg"], result["msg"]
    assert "owned by uid %d" % NOBODY in result["msg"] and "nothing was stopped" in result["msg"]


def test_a_status_forged_in_roots_build_dir_is_no_proof(victim, tmp_path):
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / STATUS).write_text(u"%s" % planted(victim))
    result = run_module({"chdir": str(tmp_path), "state": "stopped"}, timeout=120)
    time.sleep(0.3)
    assert victim.poll() is None, "a process a status file named was signalled"
    assert result.get("failed"), result["_output"]
    assert "refusing to signal module pid %d" % victim.pid in result["msg"], result["msg"]
    assert "no proof" in result["msg"] and "Nothing was signalled" in result["msg"]
