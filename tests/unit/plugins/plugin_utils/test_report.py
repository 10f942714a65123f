# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from xml.etree import ElementTree

import pytest

from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _report

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
    assert "- **node2** `build_processes`: 2 build processes still running: ninja x2" in text
    assert text.count("\n| node") == 4


@pytest.mark.parametrize("limit, abort", [(None, False), (3, False), ("3", False), (2, True), ("75%", False), ("50%", True), ("25%", True), ("0", True)])
def test_gate(report, limit, abort):
    assert _report.too_many_not_ready(report, limit)[0] is abort


@pytest.mark.parametrize("limit", ["two", "-1", "150%", "1.5", "%"])
def test_gate_rejects_bad_limits(report, limit):
    with pytest.raises(ValueError) as err:
        _report.too_many_not_ready(report, limit)
    assert str(err.value).startswith("preflight_max_not_ready:")


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
