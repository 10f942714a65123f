# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from xml.etree import ElementTree

import pytest

from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _gate, _report
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy, _policy_validation

GIB = 1024 ** 3


def check(name, status, message=""):
    return {"name": name, "ok": status in ("ok", "skipped"), "status": status, "observed": 1, "expected": 0,
            "message": message, "profile": "common"}


def readiness(ready, checks, limited_by="host"):
    return {
        "ready": ready, "checks": checks, "waited_seconds": 0,
        "ansible_facts": {
            "gpufleet_memory": {"effective": {"available_bytes": GIB, "available_human": "1.0Gi", "total_bytes": 2 * GIB,
                                              "total_human": "2.0Gi", "limited_by": limited_by},
                                "host": {"total_bytes": 24 * GIB, "total_human": "24Gi"}},
            "gpufleet_build_processes": {"count": 2},
        },
    }


RESULTS = {
    "node1": readiness(True, [check("available_memory", "ok"), check("gpu_count", "skipped", "not applied: profile gpu not selected")]),
    "node2": readiness(False, [check("available_memory", "failed", "effective available memory 1.0Gi is below"),
                               check("build_processes", "failed", "2 build processes still running: ninja x2"),
                               check("gpu_count", "unknown", "unknown: nvidia-smi hung")], limited_by="cgroup"),
    "node3": {"unreachable": True, "msg": "Failed to connect to the host via ssh: Connection refused"},
    "node4": None,
}


@pytest.fixture
def report():
    return _report.build_report(RESULTS, policy={"min_available_memory": "4GiB"})


@pytest.mark.parametrize("host, status, reason_start, failed", [
    ("node1", "ready", None, []),
    ("node2", "not_ready", "available_memory: effective available memory", ["available_memory", "build_processes", "gpu_count"]),
    ("node3", "unreachable", "unreachable: Failed to connect", []),
    ("node4", "unreachable", "no result from this host", []),
])
def test_host_entries(report, host, status, reason_start, failed):
    entry = report["hosts"][host]
    assert entry["status"] == status
    assert entry["failed_checks"] == failed
    if reason_start is None:
        assert entry["reason"] is None
    else:
        assert entry["reason"].startswith(reason_start)


def test_counts(report):
    assert report["summary"] == {"ready": 1, "not_ready": 1, "unreachable": 2, "total": 4}


def test_table_has_a_line_per_host_and_a_count_line(report):
    lines = _report.render_table(report)
    assert lines[0].split()[:2] == ["HOST", "STATUS"]
    assert lines[2].startswith("node2") and "1.0Gi / 2.0Gi (cgroup; host 24Gi)" in lines[2]
    assert "not ready" in lines[2] and "available_memory:" in lines[2]
    assert lines[3].startswith("node3") and "unreachable" in lines[3]
    assert lines[-1] == "1 ready, 1 not ready, 2 unreachable (of 4)"


def test_a_node_whose_check_could_not_run_shows_as_unknown():
    """Issue 39: readiness returns such a node with its one check, readiness, unknown: counted not ready, said unknown."""
    unchecked = dict(readiness(False, [check("readiness", "unknown", "unknown: the check could not run on this node")]),
                     ansible_facts={})
    report = _report.build_report({"node1": RESULTS["node1"], "node5": unchecked})
    lines = _report.render_table(report)
    assert lines[2].split()[:4] == ["node5", "not", "ready", "(unknown)"], lines
    assert "(unknown)" not in lines[1] and report["summary"]["not_ready"] == 1
    assert "readiness: unknown: the check could not run on this node" in lines[2]


def test_junit_is_valid_and_says_the_same(report):
    root = ElementTree.fromstring(_report.render_junit(report))
    suites = dict((s.get("name"), s) for s in root.findall("testsuite"))
    assert sorted(suites) == ["node1", "node2", "node3", "node4"]
    assert (suites["node2"].get("failures"), suites["node2"].get("errors")) == ("2", "1")
    assert suites["node1"].get("skipped") == "1" and suites["node1"].get("failures") == "0"
    assert suites["node3"].find("testcase/error").get("message").startswith("unreachable")


def test_markdown_lists_failed_checks(report):
    text = _report.render_markdown(report)
    assert "1 ready, 1 not ready, 2 unreachable (of 4)" in text
    assert "- `build_processes` — 1 host: node2" in text
    assert "  - node2: 2 build processes still running: ninja x2" in text
    assert text.count("\n| node") == 4


def test_json_render_round_trips(report):
    import json
    assert json.loads(_report.render_json(report))["summary"] == report["summary"]


@pytest.mark.parametrize("policies, expected", [
    ([{"min_available_memory": "4GiB"}, {"min_available_memory": "4GiB"}], {"min_available_memory": "4GiB"}),
    ([{"min_available_memory": "4GiB"}, {"min_available_memory": "8GiB"}], {"per_host": True}),
    ([None, None], {}),
])
def test_report_keeps_the_policy_used(policies, expected):
    results = {}
    for index, policy in enumerate(policies):
        result = readiness(True, [check("available_memory", "ok")])
        if policy:
            result["policy"] = policy
        results["n%d" % index] = result
    assert _report.build_report(results)["policy"] == expected


# ---------------------------------------------------------------- issue 12 items 11 and 19

HOSTILE = "\x1b[31mninja\x07\x00\r\x9b\ud800"


def hostile_report():
    message = "1 build process still running: %s (pid 7)" % HOSTILE
    return _report.build_report({
        "node1": readiness(False, [check("build_processes", "failed", message),
                                   dict(check("custom", "unknown", "odd \x1b[0m"), observed=[HOSTILE])]),
        "node2": {"unreachable": True, "msg": "ssh: \x1b]0;title\x07 refused"},
    })


def test_junit_is_valid_xml_whatever_the_process_names():
    text = _report.render_junit(hostile_report())
    root = ElementTree.fromstring(text)  # raised "not well-formed" before
    messages = [node.get("message") for node in root.iter() if node.get("message")]
    assert any("\\x1b[31mninja\\x07\\x00\\x0d\\x9b\\ud800" in m for m in messages), messages


@pytest.mark.parametrize("render", [_report.render_table, _report.render_markdown, _report.render_json, _report.render_junit])
def test_no_report_carries_control_characters(render):
    text = render(hostile_report())
    text = "\n".join(text) if isinstance(text, list) else text
    assert not [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f], repr(text)


def test_the_console_table_keeps_one_line_per_host():
    lines = _report.render_table(_report.build_report({"node1": readiness(False, [check("x", "failed", "two\nlines")])}))
    assert len(lines) == 3 and "two lines" in lines[1]


@pytest.mark.parametrize("name, head, own", [
    ("preflight.json", b'{\n  "finished": "2026-12-01T08:00:00Z",\n  "hosts"', True),
    ("preflight.xml", b'<testsuites name="gpufleet.preflight"><testsuite', True),
    ("preflight.md", b"# Fleet preflight\n\n1 ready", True),
    ("preflight.md", b"", True),                       # empty: nothing to lose
    ("preflight.md", b"# My notes on preflight\n", False),
    ("preflight.json", b'{"mine": true}', False),
    ("preflight.xml", b"<testsuites name='ci'>", False),
])
def test_only_earlier_reports_count_as_own(name, head, own):
    assert _report.is_own_report(name, head) is own


def test_each_rendering_starts_with_its_signature(report):
    for name, render in (("preflight.json", _report.render_json), ("preflight.xml", _report.render_junit),
                         ("preflight.md", _report.render_markdown)):
        assert _report.is_own_report(name, render(report).encode("utf-8")[:256])


# ---------------------------------------------------------------- issue 20: the gate, grouping, one column list

@pytest.mark.parametrize("limit, decision, allowed, reason", [
    (None, "continue", None, "no preflight_max_not_ready: no limit; 3 of 4 hosts are not ready or unreachable"),
    ("3", "continue", 3, "3 of 4 hosts are not ready or unreachable, within preflight_max_not_ready=3"),
    ("50%", "stop", 2, "3 of 4 hosts are not ready or unreachable, more than preflight_max_not_ready=50% (2 of 4 hosts) allows"),
])
def test_the_gate_decision(report, limit, decision, allowed, reason):
    gate = _gate.gate(report, limit)
    assert gate == {"decision": decision, "abort": decision == "stop", "reason": reason, "not_ready": 3, "total": 4,
                    "max_not_ready": limit, "allowed": allowed}


@pytest.mark.parametrize("limit", [None, "4", "100%"])
def test_no_ready_host_stops_the_run_whatever_the_limit(report, limit):
    """Otherwise end_host's later plays ran on nobody and the run exited 0 (issue 27 item 1)."""
    for entry in report["hosts"].values():
        if entry["status"] == "ready":
            entry["status"] = "not_ready"
    report["summary"]["ready"], report["summary"]["not_ready"] = 0, report["summary"]["not_ready"] + report["summary"]["ready"]
    gate = _gate.gate(report, limit)
    assert gate["abort"] and gate["decision"] == "stop" and gate["reason"] == "none of the 4 hosts is ready: nothing to go on with"
    # preflight_fail_when_not_ready false: a run that only records verdicts
    assert _gate.gate(report, limit, stop_when_none_ready=False)["abort"] is False


def stopped(report):
    report["gate"] = _gate.gate(report, "50%")
    return report


def test_every_rendering_says_the_gate_stopped_the_run(report):
    stopped(report)
    why = "3 of 4 hosts are not ready or unreachable, more than preflight_max_not_ready=50% (2 of 4 hosts) allows"
    assert _report.render_table(report)[-1] == "Gate: STOPPED THE RUN - " + why
    assert "**Gate: STOPPED THE RUN - 3 of 4 hosts" in _report.render_markdown(report)
    import json
    assert json.loads(_report.render_json(report))["gate"]["decision"] == "stop"
    suite = [s for s in ElementTree.fromstring(_report.render_junit(report)).findall("testsuite") if s.get("name") == "gate"]
    assert len(suite) == 1 and suite[0].get("failures") == "1"
    assert suite[0].find("testcase/failure").get("message") == "stopped the run: " + why


def test_junit_gate_case_passes_when_the_run_goes_on(report):
    report["gate"] = _gate.gate(report, "3")
    suite = ElementTree.fromstring(_report.render_junit(report)).find("testsuite")
    assert suite.get("name") == "gate" and suite.get("failures") == "0" and suite.find("testcase/failure") is None
    report["gate"] = _gate.gate(report, None)   # no limit: no gate to pass or fail, no suite
    assert [s.get("name") for s in ElementTree.fromstring(_report.render_junit(report))] == ["node1", "node2", "node3", "node4"]


def test_one_column_list_drives_console_markdown_and_html(report):
    """A new column is one entry: the console, Markdown and HTML tables all grow it (issue 21: range(4), numeric=(3,))."""
    from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _html_report
    extra = _report.Column(key="waited", header="WAITED S", cell=lambda name, entry: str(entry.get("waited_seconds")), numeric=True)
    columns = _report.COLUMNS[:2] + (extra,) + _report.COLUMNS[2:]
    table = _report.render_table(report, columns)
    assert table[0].startswith("HOST   STATUS       WAITED S  EFFECTIVE")
    assert table[1].startswith("node1  ready        " + "0".rjust(len("WAITED S")) + "  1.0Gi")
    md = _report.render_markdown(report, columns)
    assert "| HOST | STATUS | WAITED S | EFFECTIVE" in md
    separator = [line for line in md.splitlines() if line.startswith("| --- |")][0]
    cells = separator.strip("|").split("|")
    assert len(cells) == len(columns) and cells[2].strip() == "---:"  # right-aligned because numeric; the rest follow theirs
    assert [cell.strip() == "---:" for cell in cells] == [column.numeric for column in columns]
    original = _report.COLUMNS
    try:
        _report.COLUMNS = columns
        page = _html_report.render_preflight_html(report)
    finally:
        _report.COLUMNS = original
    assert '<th class="num">WAITED S</th>' in page


def test_the_console_pads_every_column_but_the_last(report):
    lines = _report.render_table(report)
    starts = [line.index(h) for line in lines[:1] for h in ("STATUS", "EFFECTIVE", "BUILD PROCS", "FIRST FAILED")]
    for line in lines[1:5]:
        assert [line[s - 2:s] for s in starts] == ["  "] * 4, line


def test_identical_failures_of_one_node_are_said_once():
    gpu = "nvidia-smi not found: install the NVIDIA driver"
    results = {"cpu1": readiness(False, [check(name, "unknown", gpu) for name in ("gpu_count", "gpu_memory", "gpu_health")]
                                 + [check("available_memory", "failed", "1.0Gi below 4Gi")]),
               "cpu2": readiness(False, [check(name, "unknown", gpu) for name in ("gpu_count", "gpu_memory", "gpu_health")]),
               "gpu1": readiness(False, [check("available_memory", "failed", "2.0Gi below 4Gi")]),
               "gone": None}
    groups = _report.failure_groups(_report.build_report(results))
    assert [(g["checks"], g["hosts"]) for g in groups] == [
        (["available_memory"], ["cpu1", "gpu1"]), (["gpu_count", "gpu_memory", "gpu_health"], ["cpu1", "cpu2"]),
        (["reachable"], ["gone"])]
    assert groups[1]["messages"] == [{"message": gpu, "hosts": ["cpu1", "cpu2"]}]
    assert [m["hosts"] for m in groups[0]["messages"]] == [["cpu1"], ["gpu1"]]
    text = _report.render_markdown(_report.build_report(results))
    failures = text.split("## Failures by check")[1].split("## Hosts")[0]
    assert failures.count("nvidia-smi not found") == 1, failures


def test_the_grid_has_a_cell_per_host_and_check(report):
    grid = _report.grid(report)
    assert grid["checks"] == ["available_memory", "gpu_count", "build_processes"]
    assert [len(row["cells"]) for row in grid["rows"]] == [3, 3, 3, 3]
    assert [c["mark"] for c in grid["rows"][1]["cells"]] == ["FAIL", "?", "FAIL"]
    assert [c["status"] for c in grid["rows"][2]["cells"]] == [None, None, None]


def test_build_processes_are_shown_with_pid_state_and_age():
    """README promises pid, orphaned/zombie and age; the check's message groups same-named ones as 'make x2'."""
    result = readiness(False, [check("build_processes", "failed", "3 build processes still running: make x2, ninja (pid 9)")])
    result["ansible_facts"]["gpufleet_build_processes"] = {"count": 3, "processes": [
        {"pid": 7, "name": "make", "orphaned": True, "zombie": False, "age_seconds": 7380, "rss_bytes": 1},
        {"pid": 8, "name": "make", "orphaned": False, "zombie": True, "age_seconds": 30, "rss_bytes": 1},
        {"pid": 9, "name": "ninja", "orphaned": False, "zombie": False, "age_seconds": 61, "rss_bytes": 1}]}
    report = _report.build_report({"n1": result})
    assert _report.process_rows(report) == [("n1", "7", "make", "orphaned", "2h 03m"), ("n1", "8", "make", "zombie", "30s"),
                                            ("n1", "9", "ninja", "running", "1m 01s")]
    md = _report.render_markdown(report)
    assert "| n1 | 7 | make | orphaned | 2h 03m |" in md and "| n1 | 8 | make | zombie | 30s |" in md


# ---------------------------------------------------------------- issue 18 items 13 and the sweep's wrong shapes

EVIL = u"ld.<img src=x onerror=alert(1)>\u202egnp.exe"


def evil_report():
    message = "1 build process still running: %s (pid 7)" % EVIL
    result = readiness(False, [check("build_processes", "failed", message)])
    result["ansible_facts"]["gpufleet_build_processes"] = {"count": 1, "processes": [
        {"pid": 7, "name": EVIL, "orphaned": True, "zombie": False, "age_seconds": 5}]}
    return _report.build_report({u"node\u202e1": result})


def test_markdown_carries_no_raw_html_of_a_process_name():
    text = _report.render_markdown(evil_report())
    import re
    assert not re.search(r"(?<!\\)[<>]", text) and "\\<img src=x onerror=alert(1)\\>" in text


@pytest.mark.parametrize("render", [_report.render_table, _report.render_markdown, _report.render_json, _report.render_junit])
def test_no_report_carries_a_bidi_override(render):
    text = render(evil_report())
    text = "\n".join(text) if isinstance(text, list) else text
    assert u"\u202e" not in text and "\\u202e" in text


def test_every_format_character_is_neutralised():
    import sys
    import unicodedata
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if unicodedata.category(char) == "Cf" or char in u"\u2028\u2029":
            assert char not in _report.safe(u"a%sb" % char), "U+%04X" % code


def test_an_unknown_check_whose_reason_another_failure_says_is_merged_into_it():
    """The GPU-less node of the fleet test: gpu_count says it with its numbers, four checks say 'unknown: ...'."""
    reason = "nvidia-smi not found on PATH or in /usr/bin: is the NVIDIA driver installed?"
    checks = [check("gpu_count", "failed", "0 GPUs usable, 8 expected: %s (not_found)" % reason)]
    checks += [check(name, "unknown", "unknown: nvidia-smi state is not_found: %s" % reason)
               for name in ("compute_capability", "ecc_errors", "row_remaps")]
    checks += [check("disk_space", "unknown", "unknown: disk facts were not gathered")]
    entry = _report.build_report({"n": readiness(False, checks)})["hosts"]["n"]
    assert _report.node_failures(entry) == [
        (("gpu_count", "compute_capability", "ecc_errors", "row_remaps"), "0 GPUs usable, 8 expected: %s (not_found)" % reason),
        (("disk_space",), "unknown: disk facts were not gathered")]


@pytest.mark.parametrize("rule, total, required", [
    ("4GiB", 64 * GIB, 4 * GIB), ("0.5", 64 * GIB, 32 * GIB), (0.25, 8 * GIB, 2 * GIB), ("3GiB", None, None)])
def test_the_required_minimum_is_the_one_the_check_computed(rule, total, required):
    """The fleet chart draws the minimum check_available_memory computed (no second parse of the option)."""
    memory = {"effective": {"available_bytes": GIB, "total_bytes": total}} if total else {}
    policy = _policy_validation.validate_policy({"min_available_memory": rule})
    checks = [_policy.check_available_memory({"memory": memory}, policy)]
    assert _report.required_memory(checks) == required
    assert _report.required_memory([]) is None
    assert _report.required_memory([dict(checks[0], required_bytes="4GiB")]) is None


def test_one_huge_message_does_not_make_every_report_huge():
    """A node's 5 MB failure message is kept to MESSAGE_KEPT characters in every rendering, with a note that says so."""
    from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _html_report
    huge = "x" * (5 * 1024 * 1024)
    results = {"n1": readiness(False, [{"name": "gpu_count", "status": "failed", "message": huge}]),
               "n2": readiness(True, []), "n3": {"unreachable": True, "msg": huge}}
    report = _report.build_report(results)
    report["gate"] = _gate.gate(report, "0")
    assert report["hosts"]["n1"]["checks"][0]["message"].endswith(
        "[cut: %d characters in all; the host's registered readiness result has the whole text]" % len(huge))
    assert len("\n".join(_report.render_table(report))) < 4 * _report.MESSAGE_KEPT
    renderings = [_report.render_json(report), _report.render_markdown(report), _report.render_junit(report),
                  _html_report.render_preflight_html(report)]
    for text in renderings:
        assert len(text) < 30 * _report.MESSAGE_KEPT, len(text)
        assert "characters in all" in text
    assert results["n1"]["checks"][0]["message"] is huge  # the registered result is not touched


def test_a_column_without_its_header_names_the_header():
    with pytest.raises(TypeError, match="header"):
        _report.Column(key="waited", cell=lambda name, entry: "")  # pylint: disable=missing-kwoa


def test_every_column_shows_a_real_value_for_some_recorded_host():
    """A column reading a key host_entry never fills shows '-' on every row: each column must show a value on at least
    one host of a real 8-node run (tests/tools/recorded: ready, not ready, cgroup-limited nodes)."""
    import json
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "..", "tools", "recorded", "preflight_8_nodes.json")) as handle:
        results = json.load(handle)
    report = _report.build_report(results)
    empty = [column.header for column in _report.COLUMNS
             if all(column.cell(name, entry) in ("-", "", "None") for name, entry in report["hosts"].items())]
    assert not empty, "these columns show no value on any recorded host (a key host_entry never fills?): %s" % empty
