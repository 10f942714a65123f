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
        "node1": {"jid": "123", "status_path": "/b/gpufleet-build.status.json", "run_id": None}}
    assert action.check_jobs({"n1": "j1.2"}, {"n1": "/b/s.json", "n2": "/c"}, {"n1": "n1-17"}) == {
        "n1": {"jid": "j1.2", "status_path": "/b/s.json", "run_id": "n1-17"}}
    assert action.check_jobs({"n1": {"jid": 1, "status_path": "/s", "run_id": "r"}})["n1"]["run_id"] == "r"
    with pytest.raises(AnsibleActionFail, match="run_ids: the run id of n1 must be a non-empty string"):
        action.check_jobs({"n1": "j1.2"}, {"n1": "/b/s.json"}, {"n1": ["x"]})
    with pytest.raises(AnsibleActionFail, match="jobs: the status_path of n1 must be an absolute path"):
        action.check_jobs({"n1": {"jid": 1, "status_path": "build/s.json"}})
    with pytest.raises(AnsibleActionFail, match="or a job id with the path in status_paths"):
        action.check_jobs({"n1": "j1.2"}, {"n2": "/c"})


@pytest.mark.parametrize("option, value", [
    ("interval", 0.0), ("interval", 1e9), ("timeout", -1.0), ("unreachable_after", 0), ("status_every", 0),
    ("max_status_bytes", 100), ("max_status_bytes", 1 << 40),
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


class FakeHandler(object):
    """Answers build_status and async_status the way a node would, from what the test put there."""

    def __init__(self, statuses, job=None):
        self.statuses = list(statuses)
        self.job = job
        self.calls = []

    def get_shell_option(self, name, default=None):
        return default

    def _remote_expand_user(self, path):
        return path

    def _execute_module(self, module_name=None, module_args=None, task_vars=None):
        self.calls.append(module_name)
        if module_name == "gpufleet.preflight.build_status":
            return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return self.job or {"started": 1, "finished": 0}


def watch_of(statuses, job=None, run_id="n1-2"):
    job_entry = {"jid": "1.2", "status_path": "/b/gpufleet-build.status.json", "run_id": run_id}
    return action.NodeWatch("n1", job_entry, FakeHandler(statuses, job), {})


def test_a_wrong_shaped_status_is_the_nodes_error_and_the_watch_goes_on():
    watch = watch_of([{"status": [1]}])
    watch.poll(5)
    assert watch.node["status_error"].endswith("the status file holds a list, not a JSON object")
    assert watch.node["status"] is None and not view.over(watch.node) and watch.failures == 0
    watch = watch_of([{"error": "/b/gpufleet-build.status.json is 104857600 bytes, more than the 1048576 a status "
                                "file may be: not read", "exists": True}])
    watch.poll(5)
    assert "104857600 bytes" in watch.node["status_error"]


def test_the_previous_runs_succeeded_status_does_not_end_the_watch():
    """Finding 10: the dir's last build left "succeeded"; the new module has not written yet."""
    earlier = {"status": {"state": "succeeded", "run_id": "n1-1", "progress": {"done": 9, "total": 9}}}
    ours = {"status": {"state": "running", "run_id": "n1-2", "progress": {"done": 2, "total": 9}}}
    watch = watch_of([earlier, earlier, ours])
    watch.poll(5)
    assert view.phase(watch.node) == "starting" and not view.over(watch.node)
    watch.poll(5)
    watch.poll(5)
    assert view.phase(watch.node) == "compiling" and watch.node["status"]["run_id"] == "n1-2"
    ended = {"status": {"state": "succeeded", "run_id": "n1-2", "progress": {"done": 9, "total": 9}}}
    watch = watch_of([ended], job={"finished": 1, "failed": False, "attempts": [{"jobs": 2}]})
    watch.poll(5)
    assert view.over(watch.node) and view.phase(watch.node) == "done"


def test_an_interrupted_watch_says_how_to_stop_the_builds():
    running_watch = watch_of([{"status": None}])
    done_watch = watch_of([{"status": None}])
    done_watch.node["result"] = {"failed": False}
    text = action.interrupted_message({"node2": running_watch, "node1": done_watch, "node3": watch_of([{}])})
    assert "the builds on node2, node3 keep running" in text
    assert "ansible-playbook gpufleet.preflight.build_stop -i <inventory> -e build_stop_hosts=node2,node3" in text
    assert "a build other than the sgl_kernel role's: add -e build_stop_chdir=<its chdir>" in text   # issue 39
