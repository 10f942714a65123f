# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_build_view: phases, ETA, the live table's rows and the build report, from guarded_build status files."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

import pytest

from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _build_view as view
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _build_view_input as view_input

MIB = 1024 ** 2
OOM_ATTEMPT = {"attempt": 1, "jobs": 4, "oom": True, "kind": "oom", "oom_kills": 1, "duration": 6.0,
               "peak_memory_bytes": 400 * MIB, "why": "the build cgroup's oom_kill counter rose by 1",
               "failed_steps": ["FAILED: unit_3.o"], "progress": {"done": 5, "total": 14, "percent": 35.7}}
OK_ATTEMPT = {"attempt": 2, "jobs": 2, "oom": False, "kind": "ok", "oom_kills": 0, "duration": 12.0,
              "peak_memory_bytes": 245 * MIB, "why": "exit status 0", "failed_steps": [],
              "progress": {"done": 9, "total": 9, "percent": 100.0}}
FAILED_ATTEMPT = {"attempt": 1, "jobs": 2, "oom": False, "kind": "failed", "oom_kills": 0, "duration": 3.0,
                  "peak_memory_bytes": 10 * MIB, "why": "exit status 1",
                  "failed_steps": ["FAILED: csrc/gemm.cu.o", "FAILED: csrc/other.cu.o"]}


def running(progress=None, step=None, state="running", attempts=(), elapsed=20.0, attempt=1, **more):
    status = {"state": state, "attempt": attempt, "jobs": 2, "memory_bytes": 100 * MIB, "memory_limit_bytes": 400 * MIB,
              "elapsed_seconds": elapsed, "attempts": list(attempts), "progress": progress}
    if step:
        status["step"] = step
    status.update(more)
    return {"status": status, "result": None, "unreachable": None}


@pytest.mark.parametrize("node, expected", [
    ({}, "queued"),
    ({"status": None, "result": None, "unreachable": None}, "queued"),
    (running(), "configuring"),
    (running({"done": 3, "total": 14, "percent": 21.4}), "compiling"),
    (running({"done": 13, "total": 14, "percent": 92.9}, step="Linking CXX shared module common_ops.so"), "linking"),
    (running({"done": 14, "total": 14, "percent": 100.0}), "installing"),
    (running({"done": 14, "total": 14, "percent": 100.0}, state="succeeded"), "done"),
    (running(state="failed"), "failed"),
    ({"status": None, "result": {"failed": False}, "unreachable": None}, "done"),
    ({"status": None, "result": {"failed": True}, "unreachable": None}, "failed"),
    (dict(running({"done": 3, "total": 14}), unreachable="ssh: connect to host 127.0.0.12 port 22: Connection refused"),
     "unreachable"),
])
def test_phase(node, expected):
    assert view.phase(node) == expected


@pytest.mark.parametrize("progress, elapsed, expected", [
    (None, 10, None),
    ({"done": 0, "total": 10}, 10, None),          # no rate yet
    ({"done": 5, "total": 10}, 0, None),
    ({"done": 6, "total": 14}, 0.2, None),         # an attempt just begun, its counter still the last one
    ({"done": 5, "total": 10}, 10, 10.0),
    ({"done": 1, "total": 100}, 30, 2970.0),
    ({"done": 10, "total": 10}, 10, 0.0),
])
def test_eta(progress, elapsed, expected):
    assert view.eta_seconds(progress, elapsed) == expected


def test_attempt_elapsed_leaves_out_earlier_attempts():
    status = running(attempts=[OOM_ATTEMPT], elapsed=20.0, attempt=2)["status"]
    assert view.attempt_elapsed(status) == 14.0
    assert view.attempt_elapsed({}) is None


@pytest.mark.parametrize("seconds, text", [(None, "-"), (0, "0s"), (59.4, "59s"), (61, "1m01s"), (7620, "2h07m")])
def test_duration(seconds, text):
    assert view.duration(seconds) == text


@pytest.mark.parametrize("node, backoffs, failed_step", [
    (running({"done": 2, "total": 9}, attempts=[OOM_ATTEMPT], attempt=2), 1, None),
    (running(state="oom-backoff", attempts=[OOM_ATTEMPT]), 1, None),
    # the last attempt OOM-killed and the build gave up: no backoff followed it
    ({"status": running(attempts=[OOM_ATTEMPT])["status"],
      "result": {"failed": True, "attempts": [OOM_ATTEMPT], "failed_steps": ["FAILED: unit_3.o"]}, "unreachable": None}, 0, None),
    ({"status": None, "result": {"failed": True, "attempts": [FAILED_ATTEMPT]}, "unreachable": None}, 0, "csrc/gemm.cu.o"),
    ({"status": None, "result": {"failed": False, "attempts": [OOM_ATTEMPT, OK_ATTEMPT]}, "unreachable": None}, 1, None),
])
def test_backoffs_and_first_failed_step(node, backoffs, failed_step):
    assert view.backoffs(node) == backoffs
    assert view.first_failed_step(node) == failed_step


def test_table_rows():
    nodes = {
        "node2": running({"done": 5, "total": 10, "percent": 50.0}, elapsed=10.0),
        "node1": {"status": running()["status"], "result": {"failed": False, "final_jobs": 2, "attempts": [OOM_ATTEMPT, OK_ATTEMPT],
                                                            "memory_limit_bytes": 400 * MIB}, "unreachable": None},
        "node3": dict(running({"done": 1, "total": 10}), unreachable="Connection refused"),
        "node4": {},
    }
    lines = view.render_table(nodes, 75)
    assert lines[0] == "BUILD 1m15s: 1 queued, 1 compiling, 1 done, 1 unreachable (of 4)"
    assert lines[1].split()[:3] == ["NODE", "PHASE", "PROGRESS"]
    rows = dict((line.split()[0], line) for line in lines[2:])
    assert list(rows) == ["node1", "node2", "node3", "node4"]
    assert view.row("node1", nodes["node1"]) == ("node1", "done", "[9/9] 100.0%", "-", "2 (1 backoff)", "- / 400Mi",
                                                 "400Mi", "1", "-")
    assert view.row("node2", nodes["node2"])[1:6] == ("compiling", "[5/10] 50.0%", "10s rate", "2", "100Mi / 400Mi")
    assert view.row("node3", nodes["node3"])[-1] == "unreachable: Connection refused"
    assert view.row("node4", nodes["node4"])[1:3] == ("queued", "-")
    assert not view.all_final(nodes)
    assert view.all_final({"a": nodes["node1"], "b": nodes["node3"]})


def test_a_hostile_message_stays_on_one_line():
    node = {"status": None, "result": {"failed": True, "msg": "bad\n\x1b[31mred\tstep"}, "unreachable": None}
    cell = view.row("n", node)[-1]
    assert "\n" not in cell and "\x1b" not in cell


def test_report_events_and_renderings():
    timeline = [[0.0, 10 * MIB, 4, 1], [2.0, 380 * MIB, 4, 1], [6.5, 5 * MIB, 2, 2], [8.5, 245 * MIB, 2, 2]]
    nodes = {
        "node1": {"status": dict(running(state="succeeded")["status"], timeline=timeline),
                  "result": {"failed": False, "changed": True, "final_jobs": 2, "duration": 18.0,
                             "attempts": [OOM_ATTEMPT, OK_ATTEMPT], "msg": "built in 2 attempts, final jobs=2"},
                  "unreachable": None},
        "node2": dict(running({"done": 1, "total": 10}), unreachable="Connection refused"),
    }
    report = view.build_report(nodes, finished="2026-12-01T10:00:00Z")
    node1 = report["nodes"]["node1"]
    assert node1["events"] == [{"t": 6.5, "kind": "oom", "label": "OOM at jobs=4, resumed with jobs=2"}]
    assert node1["peak_memory_bytes"] == 400 * MIB and node1["backoffs"] == 1 and node1["oom_kills"] == 1
    assert report["summary"] == {"nodes": 2, "done": 1, "failed": 0, "stopped": 0, "unreachable": 1, "running": 0, "backoffs": 1,
                                 "oom_kills": 1, "peak_memory_bytes": 400 * MIB, "peak_memory_human": "400Mi",
                                 "longest_seconds": 20.0}
    text = view.render_json(report)
    assert text.encode().startswith(view.REPORT_SIGNATURES["build.json"])
    assert json.loads(text)["nodes"]["node1"]["timeline"] == timeline
    markdown = view.render_markdown(report)
    assert markdown.encode().startswith(view.REPORT_SIGNATURES["build.md"])
    assert "| node1 | done | 4 → 2 | 1 | 1 | 400Mi / 400Mi | 18s | - |" in markdown
    assert "| 1 | 4 | 6s | 400Mi | 1 | oom | the build cgroup's oom\\_kill counter rose by 1 |" in markdown


def test_markdown_escapes_a_hostile_step_and_name():
    hostile = u"ld.<img src=x onerror=alert(1)>\u202egpj.exe"
    nodes = {hostile: {"status": None, "result": {"failed": True, "msg": hostile}, "unreachable": None}}
    markdown = view.render_markdown(view.build_report(nodes, finished="2026-12-01T10:00:00Z"))
    assert not re.search(r"(?<!\\)<img", markdown) and u"\u202e" not in markdown
    assert "ld.\\<img src=x onerror=alert(1)\\>\\\\u202egpj.exe" in markdown


def test_events_without_a_timeline_use_the_durations():
    assert view.events([OOM_ATTEMPT, OK_ATTEMPT], []) == [
        {"t": 6.0, "kind": "oom", "label": "OOM at jobs=4, resumed with jobs=2"}]
    assert view.events([OK_ATTEMPT], None) == []


# ---------------------------------------------------------------- issue 18 findings 9-11, issue 17 item 3

def test_every_view_function_survives_a_node_whose_files_were_wrong():
    """What the watcher keeps of a wrong-shaped status: the node's error, shown in its row; the others render."""
    nodes = {"bad": {"status": None, "result": None, "unreachable": None,
                     "status_error": "/b/gpufleet-build.status.json: the status file holds a list, not a JSON object"},
             "good": running({"done": 3, "total": 9, "percent": 33.3})}
    lines = view.render_table(nodes, 10)
    assert "status: /b/gpufleet-build.status.json: the status file holds a list" in lines[2]
    assert view.build_report(nodes)["nodes"]["bad"]["status_error"].endswith("not a JSON object")
    result = view_input.check_result({"failed": False, "attempts": ["x", {"jobs": 2}]})
    assert result["attempts"] == [] and "attempts[0] is a string" in result["result_error"]
    assert view_input.check_result("x") == {"failed": True, "msg": "the job's result is a string, not an object"}


def test_an_earlier_runs_status_is_not_this_runs_end():
    """The second build of a dir: the first run's "succeeded" status is there before the new module writes its
    own. Whatever the file says, a node is over only once its job's result is in."""
    earlier = {"state": "succeeded", "run_id": "node1-1", "progress": {"done": 9, "total": 9}}
    assert not view.belongs(earlier, "node1-2") and view.belongs(earlier, "node1-1") and view.belongs(earlier, None)
    assert not view.belongs({"state": "succeeded"}, "node1-2"), "a file without a run id is not the run followed"
    node = {"status": None, "result": None, "unreachable": None, "foreign": True}
    assert view.phase(node) == "starting" and not view.all_final({"node1": node})
    node = {"status": dict(earlier, run_id="node1-2"), "result": None, "unreachable": None}
    assert view.phase(node) == "done" and not view.all_final({"node1": node}), "done only once the job says so"
    node["result"] = {"failed": False}
    assert view.all_final({"node1": node})


def test_a_stopped_build_shows_stopped():
    status = dict(running({"done": 3, "total": 9})["status"], state="stopped", message="stopped on request")
    node = {"status": status, "result": None, "unreachable": None}
    assert view.phase(node) == "stopped" and not view.over(node)
    node["result"] = {"failed": True, "msg": "the build was stopped on request"}
    assert view.phase(node) == "stopped" and view.over(node)
    assert view.row("n", node)[-1] == "the build was stopped on request"
    report = view.build_report({"n": node})
    assert report["summary"]["stopped"] == 1 and "1 stopped" in view.summary_line(report)
    assert view.render_table({"n": node}, 5)[0] == "BUILD 5s: 1 stopped (of 1)"


def test_the_nodes_learned_eta_is_shown_before_the_rate():
    """Issue 17 item 4: 20 quick C++ steps of 30 in 40 s make the rate say 20 s; the node learned 2000 s."""
    node = running({"done": 20, "total": 30, "percent": 66.7}, elapsed=40.0)
    assert view.row("n", node)[3] == "20s rate"
    node["status"]["eta_seconds"] = 2000.0
    assert view.row("n", node)[3] == "33m20s learned"
    node["status"]["eta_basis"] = "rate"     # the node's smoothed rate over the whole build: it says so
    assert view.row("n", node)[3] == "33m20s rate"
    assert view_input.check_status(dict(node["status"], eta_seconds="x"))[1] == "the status file's eta_seconds is a string, not a number"


def test_progress_counts_the_whole_build_and_says_so_when_done():
    """Issue 29 item 7: the node writes progress over every attempt (steps_total); a done row shows the succeeded
    status's whole-build count, not the last attempt's [2/2]."""
    node = running({"done": 155, "total": 155, "percent": 100.0}, state="succeeded")
    node["status"]["steps_total"] = 155
    node["result"] = {"failed": False, "attempts": [{"attempt": 2, "progress": {"done": 2, "total": 2, "percent": 100.0}}]}
    assert view.row("n", node)[2] == "[155/155] 100.0%"
    assert view_input.check_status(dict(node["status"], steps_total="x"))[1] == "the status file's steps_total is a string, not a number"


@pytest.mark.parametrize("compiles, cell", [
    (None, "8"),                                                # no admission: ninja's -j
    ({"running": 2, "frozen": 0, "waiting": 6}, "2 of 8"),       # under admission: what really runs of ninja's width
    ({"running": 1, "frozen": 1, "waiting": 5}, "1 of 8, 1 frozen"),
    ({"running": "2", "frozen": 0}, "8"),                       # a bad count is not shown
    ({"running": True, "frozen": 0}, "8"),
])
def test_the_jobs_cell_says_how_many_compiles_really_run(compiles, cell):
    """Issue 35 item 9: the cold real tree's view said JOBS 2 while one compile ran for 52 minutes."""
    node = running({"done": 3, "total": 9, "percent": 33.3})
    node["status"].update(jobs=8, compiles=compiles)
    assert view.row("n", node)[4] == cell
