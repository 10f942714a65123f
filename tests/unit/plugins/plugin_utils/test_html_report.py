# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_html_report: the build and preflight pages are self-contained (no URL, script, font), escape what nodes say,
and hold one chart per node. (tests/host/test_html_chromium.py renders them in a real browser.)"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from html.parser import HTMLParser

import pytest

from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _build_view as view
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _html_report as html
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _report

MIB = 1024 ** 2
GIB = 1024 ** 3


def build_nodes():
    oom = {"attempt": 1, "jobs": 4, "oom": True, "kind": "oom", "oom_kills": 1, "duration": 6.0,
           "peak_memory_bytes": 400 * MIB, "why": "oom_kill counter rose by 1", "failed_steps": []}
    ok = {"attempt": 2, "jobs": 2, "oom": False, "kind": "ok", "oom_kills": 0, "duration": 12.0,
          "peak_memory_bytes": 245 * MIB, "why": "exit status 0", "failed_steps": []}
    timeline = [[0.0, 10 * MIB, 4, 1], [2.0, 380 * MIB, 4, 1], [6.5, 5 * MIB, 2, 2], [8.5, 245 * MIB, 2, 2]]
    return {
        "node1": {"status": {"state": "succeeded", "memory_limit_bytes": 400 * MIB, "timeline": timeline},
                  "result": {"failed": False, "attempts": [oom, ok], "final_jobs": 2, "duration": 18.0}},
        "node2": {"status": None, "result": {"failed": True, "msg": "<script>alert(1)</script> & more"},
                  "unreachable": None},
        "node3": {"status": {"state": "running"}, "result": None, "unreachable": "Connection refused"},
    }


class Collector(HTMLParser):
    def __init__(self):
        HTMLParser.__init__(self)
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def parse(text):
    collector = Collector()
    collector.feed(text)
    return collector.tags


def assert_self_contained(text):
    assert not re.search(r"https?:|//[a-z]|@import|url\(", text, re.I), "the page points outside itself"
    tags = parse(text)
    assert not [t for t, a in tags if t in ("script", "link", "img", "iframe", "object", "embed")]
    assert not [a for t, a in tags if any(k.startswith("on") for k in a)], "no event handlers"


def test_build_page():
    report = view.build_report(build_nodes(), finished="2026-12-01T10:00:00Z")
    text = html.render_build_html(report)
    assert text.startswith(html.BUILD_SIGNATURE) and text.encode().startswith(view.REPORT_SIGNATURES["build.html"])
    assert_self_contained(text)
    charts = [a for t, a in parse(text) if t == "svg" and a.get("class") == "chart"]
    assert [a["data-node"] for a in charts] == ["node1", "node2", "node3"]
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in text
    assert text.count('class="budget"') == 1     # only node1 knows its budget
    assert text.count('class="event"') == 1      # node1's one backoff
    assert "OOM at jobs=4, resumed with jobs=2" in text
    assert "no memory samples" in text           # node2 and node3 still get their (empty) chart


@pytest.mark.parametrize("timeline, span, top, expected", [
    ([[0, 0, 1, 1]], 10, 100, ["56.0,172.0"]),
    ([[10, 100, 1, 1]], 10, 100, ["628.0,14.0"]),
    ([[5, 50, 1, 1]], 10, 100, ["342.0,93.0"]),
])
def test_chart_points(timeline, span, top, expected):
    assert html.chart_points(timeline, span, top) == expected


def preflight_report():
    def ready(available):
        return {"ready": True, "checks": [{"name": "memory", "status": "passed", "message": "ok"}],
                "ansible_facts": {"gpufleet_memory": {"effective": {
                    "available_bytes": available, "available_human": "%dGi" % (available // GIB),
                    "total_bytes": 64 * GIB, "total_human": "64Gi", "limited_by": "host"}}}}
    failed = ready(2 * GIB)
    failed.update(ready=False, checks=[{"name": "min_available_memory", "status": "failed",
                                        "message": "2Gi available < 8Gi <b>needed</b>"}])
    return _report.build_report({"node1": ready(40 * GIB), "node2": failed, "node3": None},
                                finished="2026-12-01T10:00:00Z")


def test_preflight_page():
    text = html.render_preflight_html(preflight_report())
    assert text.startswith(html.PREFLIGHT_SIGNATURE)
    assert_self_contained(text)
    charts = [a for t, a in parse(text) if t == "svg" and a.get("class") == "chart"]
    assert [a["data-node"] for a in charts] == ["node1", "node2", "node3"]
    assert "Failed checks" in text and "min_available_memory" in text and "&lt;b&gt;needed&lt;/b&gt;" in text
    assert text.count('class="used"') == 2       # node3 was unreachable: no facts, no bar
    assert "1 ready, 1 not ready, 1 unreachable (of 3)" in text


def test_the_report_signatures_agree():
    """fleet_reports replaces an earlier preflight.html (and only that) by the signature _report keeps for it."""
    assert _report.SIGNATURES["preflight.html"] == html.PREFLIGHT_SIGNATURE.encode()
    assert view.REPORT_SIGNATURES["build.html"] == html.BUILD_SIGNATURE.encode()
    assert _report.is_own_report("preflight.html", html.render_preflight_html(preflight_report()).encode()[:256])
