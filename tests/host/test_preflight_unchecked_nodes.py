# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node whose check cannot run at all (issue 39): a wrong ansible_python_interpreter. playbooks/preflight.yml over
local-connection hosts of this machine, one with a Python that does not exist. Before: the check task failed those
hosts, a run of only such nodes ended with no report and no gate line (the last run's reports left looking current),
and end_host exited 2 where its Next line said 0."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MISSING_PYTHON = "/nonexistent/gpufleet/python3"
STALE = '{\n  "finished": "2000-01-01T00:00:00Z", "hosts": {"bad": {"status": "ready"}}\n}\n'


def preflight(tmp_path, *extra, **kwargs):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {
        "good": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        "bad": {"ansible_connection": "local", "ansible_python_interpreter": MISSING_PYTHON}}}}))
    argv = ["ansible-playbook", "playbooks/preflight.yml", "-i", str(inventory), "-e",
            "preflight_report_dir=%s" % (tmp_path / "reports"), "-e", "preflight_max_build_processes=100000",
            "-e", "preflight_min_available_memory=1MiB", "-e", '{"preflight_profiles": []}',
            "-e", "preflight_max_memory_pressure=100"]
    for assignment in extra:
        argv += ["-e", assignment]
    if kwargs.get("limit"):
        argv += ["--limit", kwargs["limit"]]
    return subprocess.run(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1"), check=False, timeout=300)


def test_a_run_where_no_node_could_be_checked_writes_this_runs_reports_and_gate(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "preflight.json").write_text(STALE)   # the previous run's, saying "ready"
    run = preflight(tmp_path, limit="bad")
    out = run.stdout
    assert run.returncode == 2, out
    assert "Gate: STOPPED THE RUN" in out and "Traceback" not in out, out
    assert re.search(r'"bad +not ready \(unknown\) ', out), out   # the console table's STATUS
    with open(str(tmp_path / "reports" / "preflight.json")) as handle:
        report = json.load(handle)
    assert report["finished"] != "2000-01-01T00:00:00Z", report
    entry = report["hosts"]["bad"]
    assert entry["status"] == "not_ready" and entry["failed_checks"] == ["readiness"], entry
    assert entry["checks"][0]["status"] == "unknown", entry
    assert "could not run on this node" in entry["reason"] and MISSING_PYTHON in entry["reason"], entry
    assert report["gate"]["abort"] is True, report["gate"]
    for name in ("preflight.md", "preflight.xml", "preflight.html"):
        text = (tmp_path / "reports" / name).read_text()
        assert MISSING_PYTHON in text and (name == "preflight.xml" or "not ready (unknown)" in text), name


@pytest.mark.parametrize("extra", [("preflight_drop_mode=end_host",), ("preflight_drop_mode=fail",),
                                   ("preflight_fail_when_not_ready=false",)])
def test_the_run_exits_as_its_next_line_says_with_one_node_unchecked(tmp_path, extra):
    run = preflight(tmp_path, "preflight_max_not_ready=1", *extra)
    out = run.stdout
    said = re.findall(r'"Next: [^"]*?exits (\d)', out)
    assert said and int(said[0]) == run.returncode, out
    with open(str(tmp_path / "reports" / "preflight.json")) as handle:
        assert json.load(handle)["hosts"]["good"]["status"] == "ready"


def test_end_host_shows_the_dropped_node_in_the_recap_and_names_the_group_to_target(tmp_path):
    run = preflight(tmp_path, "preflight_max_not_ready=1", "preflight_drop_mode=end_host")
    out = run.stdout
    assert run.returncode == 0, out
    recap = dict(re.findall(r"^(\w+)\s+: ok=.*?ignored=(\d+)", out, re.M))
    assert recap == {"bad": "1", "good": "0"}, out
    assert "WARNING: they leave this play only - every later play must target hosts: gpufleet_preflight_ready" in out
    assert "...ignoring" in out and "a play on any other group runs it" in out, out
