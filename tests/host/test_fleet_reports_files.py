# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/preflight.yml on this host: where the reports go, their mode, whose files they replace, and a
pattern that matches nothing (issue 12 items 15 and 19). Real ansible-playbook runs, real files."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAYBOOK = os.path.join(REPO, "playbooks", "preflight.yml")
INVENTORY = os.path.join(REPO, "inventory", "localhost.yml")
LENIENT = ["-e", "preflight_max_build_processes=100000", "-e", "preflight_min_available_memory=1MiB",
           "-e", '{"preflight_profiles": []}']


def preflight(cwd, *extra, **kwargs):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    env.pop("PWD", None)
    env.update(kwargs.get("env") or {})
    argv = ["ansible-playbook", "-i", INVENTORY, PLAYBOOK] + LENIENT + list(extra)
    return subprocess.run(argv, cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, preexec_fn=kwargs.get("preexec_fn"), check=False)


def test_without_pwd_the_reports_go_to_the_current_directory(tmp_path):
    run = preflight(tmp_path)
    assert run.returncode == 0, run.stdout
    written = sorted(os.listdir(str(tmp_path / "reports")))
    assert written == ["preflight.html", "preflight.json", "preflight.md", "preflight.xml"], run.stdout


def test_reports_honour_the_umask(tmp_path):
    run = preflight(tmp_path, preexec_fn=lambda: os.umask(0o027))
    assert run.returncode == 0, run.stdout
    for name in ("preflight.json", "preflight.md", "preflight.xml", "preflight.html"):
        assert stat.S_IMODE(os.stat(str(tmp_path / "reports" / name)).st_mode) == 0o640, name


def test_a_users_own_file_is_not_overwritten(tmp_path):
    (tmp_path / "reports").mkdir()
    mine = tmp_path / "reports" / "preflight.md"
    mine.write_text("my own notes\n")
    run = preflight(tmp_path)
    assert run.returncode != 0
    assert "%s exists and is not a report written by gpufleet.preflight; nothing was overwritten" % mine in run.stdout, run.stdout
    assert mine.read_text() == "my own notes\n"
    assert not (tmp_path / "reports" / "preflight.json").exists()
    # An earlier report of ours is replaced as before.
    mine.unlink()
    assert preflight(tmp_path).returncode == 0 and preflight(tmp_path).returncode == 0


def test_a_host_pattern_matching_nothing_fails_and_writes_nothing(tmp_path):
    run = preflight(tmp_path, "-e", "preflight_hosts=no_such_group")
    assert run.returncode != 0, run.stdout
    assert "preflight_hosts=no_such_group matches no host of the inventory" in run.stdout, run.stdout
    assert "\\'" not in run.stdout and "from an earlier run" in run.stdout, run.stdout  # no literal \' (issue 21)
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("name", ["preflight.md", "preflight.json", "preflight.xml", "preflight.html"])
def test_a_fifo_named_like_a_report_fails_at_once(tmp_path, name):
    """It was opened before the is-it-a-file check: the preflight hung for ever (issue 18 item 12)."""
    (tmp_path / "reports").mkdir()
    os.mkfifo(str(tmp_path / "reports" / name))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    run = subprocess.run(["timeout", "120", "ansible-playbook", "-i", INVENTORY, PLAYBOOK] + LENIENT, cwd=str(tmp_path), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert run.returncode not in (0, 124), run.stdout[-3000:]
    assert "%s exists and is a FIFO (named pipe), not a report written by gpufleet.preflight; nothing was overwritten" % (
        tmp_path / "reports" / name) in run.stdout, run.stdout[-3000:]
    assert stat.S_ISFIFO(os.lstat(str(tmp_path / "reports" / name)).st_mode)


@pytest.mark.parametrize("report_dir, what", [("/dev/full", "a character device"), ("plain", "a regular file")])
def test_a_report_dir_that_is_no_directory_is_said_so(tmp_path, report_dir, what):
    """It said 'File exists ... free space there' (issue 18 item 12)."""
    (tmp_path / "plain").write_text("x")
    path = report_dir if report_dir.startswith("/") else str(tmp_path / report_dir)
    run = preflight(tmp_path, "-e", "preflight_report_dir=%s" % path)
    assert run.returncode != 0
    assert "report_dir: %s exists and is %s, not a directory" % (path, what) in run.stdout, run.stdout[-3000:]
    assert "free space" not in run.stdout and "Traceback" not in run.stdout


def test_a_template_of_your_own_renders_preflight_html(tmp_path):
    """preflight_html_template reaches fleet_reports: a template extending the shipped one, replacing one block;
    a path that is not there is named, and nothing is written over the earlier page."""
    (tmp_path / "ours.html.j2").write_text('{% extends "gpufleet_preflight.html.j2" %}'
                                           '{% block title %}Rack 7 &amp; friends{% endblock %}')
    run = preflight(tmp_path, "-e", "preflight_html_template=%s" % (tmp_path / "ours.html.j2"))
    assert run.returncode == 0, run.stdout[-3000:]
    page = (tmp_path / "reports" / "preflight.html").read_text()
    assert "<title>Rack 7 &amp; friends" in page and "localhost" in page, page[:500]

    missing = str(tmp_path / "nope.j2")
    run = preflight(tmp_path, "-e", "preflight_html_template=%s" % missing)
    assert run.returncode != 0
    assert "html_template: %s is not a readable template file" % missing in run.stdout, run.stdout[-3000:]
    assert "Rack 7" in (tmp_path / "reports" / "preflight.html").read_text(), "the earlier page is kept"
