# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/action/build_watch.py: option checks naming the option, and the report files it may (not) replace.
(The loop itself runs for real on the fleet: tests/fleet/test_build_view_fleet.py.)"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.gpufleet.preflight.plugins.action import build_watch as action
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _build_view as view

ARGS = {"interval": 30.0, "timeout": 0.0, "unreachable_after": 3, "status_every": 5}


@pytest.mark.parametrize("jobs, message", [
    ({"node1": "1234.5678"}, "jobs: the entry of node1 must be a dict with jid"),
    ({"node1": {"jid": "1"}}, "status_path"),
    ({"node1": {"status_path": "/x"}}, "jid"),
    ({"node1": None}, "node1"),
])
def test_bad_jobs_are_named(jobs, message):
    with pytest.raises(AnsibleActionFail, match=message):
        action.check_jobs(jobs)


def test_good_jobs():
    assert action.check_jobs({"node1": {"jid": 123, "status_path": "/b/gpufleet-build.status.json", "x": 1}}) == {
        "node1": {"jid": "123", "status_path": "/b/gpufleet-build.status.json"}}
    assert action.check_jobs({"n1": "j1.2"}, {"n1": "/b/s.json", "n2": "/c"}) == {"n1": {"jid": "j1.2", "status_path": "/b/s.json"}}
    with pytest.raises(AnsibleActionFail, match="or a job id with the path in status_paths"):
        action.check_jobs({"n1": "j1.2"}, {"n2": "/c"})


@pytest.mark.parametrize("option, value", [
    ("interval", 0.0), ("interval", 1e9), ("timeout", -1.0), ("unreachable_after", 0), ("status_every", 0),
])
def test_bad_numbers_are_named(option, value):
    with pytest.raises(AnsibleActionFail, match="^%s must be" % option):
        action.check_numbers(dict(ARGS, **{option: value}))


def report():
    return view.build_report({"node1": {"status": None, "result": {"failed": False, "attempts": []}}}, finished="now")


def test_reports_written_and_replaced(tmp_path):
    target = str(tmp_path / "out")
    files = action.write_reports(target, report())
    assert sorted(os.path.basename(f) for f in files) == ["build.html", "build.json", "build.md"]
    with open(os.path.join(target, "build.json")) as handle:
        assert json.load(handle)["summary"]["done"] == 1
    assert action.write_reports(target, report()) == files   # an earlier report is replaced
    assert sorted(os.listdir(target)) == ["build.html", "build.json", "build.md"]


def test_a_foreign_file_is_never_overwritten(tmp_path):
    (tmp_path / "build.md").write_text("my notes\n")
    with pytest.raises(AnsibleActionFail, match="build.md exists and is not a build report"):
        action.write_reports(str(tmp_path), report())
    assert (tmp_path / "build.md").read_text() == "my notes\n"
    assert sorted(os.listdir(str(tmp_path))) == ["build.md"], "nothing else written either"


def test_an_unwritable_report_dir_is_named(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(AnsibleActionFail, match="report_dir: cannot write the build report"):
        action.write_reports(str(tmp_path / "file" / "sub"), report())


@pytest.mark.parametrize("report_dir, message", [
    ("   ", "report_dir: '   ' is not a directory path"),
    ("/tmp\x00x", "report_dir: .* is not a directory path"),
    ("FILE", "report_dir: .*file exists and is not a directory"),
])
def test_a_report_dir_that_cannot_hold_the_report_is_refused_before_the_watch(tmp_path, report_dir, message):
    (tmp_path / "file").write_text("")
    report_dir = str(tmp_path / "file") if report_dir == "FILE" else report_dir
    with pytest.raises(AnsibleActionFail, match=message):
        action.check_report_dir({"report_dir": report_dir, "write": True})
    action.check_report_dir({"report_dir": report_dir, "write": False})   # not written: not looked at
    action.check_report_dir({"report_dir": str(tmp_path / "missing"), "write": True})   # made at the end


def test_an_empty_report_for_no_jobs():
    assert view.build_report({}, finished="now")["summary"]["done"] == 0


@pytest.mark.parametrize("message, expected", [
    ("Data could not be sent to remote host '127.0.0.12'. Make sure this host can be reached over SSH: "
     "[Errno 32] Broken pipe", "[Errno 32] Broken pipe"),
    ("Failed to connect to the host via ssh: ssh: connect to host 127.0.0.12 port 22: Connection refused",
     "Connection refused"),
    ("timed out", "timed out"),
    ("", "Unexpected AnsibleConnectionFailure error."),
])
def test_short_error(message, expected):
    from ansible.errors import AnsibleConnectionFailure  # pylint: disable=import-outside-toplevel
    assert action.short_error(AnsibleConnectionFailure(message)) == expected
