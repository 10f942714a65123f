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
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _gate, _report

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
    assert "<td>4 → 2</td><td>400Mi → 245Mi</td>" in text   # jobs and peak per attempt in the summary


def test_the_build_chart_reaches_the_recorded_peak_and_draws_the_jobs():
    """Samples topped out at 380Mi under a 400Mi peak (issue 20 item 4): each attempt's recorded peak is marked at
    its height, and the jobs are a step line 4 -> 2 with labels."""
    report = view.build_report(build_nodes(), finished="2026-12-01T10:00:00Z")
    chart = html.memory_chart("node1", report["nodes"]["node1"])
    highest_sample = min(float(p.split(",")[1]) for p in chart["points"].split())
    assert [p["label"] for p in chart["peaks"]] == ["peak 400Mi", "peak 245Mi"]
    assert chart["peaks"][0]["y"] < highest_sample                      # higher on the page than any sample
    assert abs(chart["peaks"][0]["y"] - chart["budget"]["y"]) < 0.01    # 400Mi peak on the 400Mi budget
    assert [l["label"] for l in chart["jobs_labels"]] == ["4 jobs", "2 jobs"]
    assert len(chart["jobs_points"].split()) == 4
    text = html.render_build_html(report)
    assert text.count('class="peak"') == 2 and text.count('class="jobs"') == 1


@pytest.mark.parametrize("timeline, span, top, expected", [
    ([[0, 0, 1, 1]], 10, 100, ["56.0,172.0"]),
    ([[10, 100, 1, 1]], 10, 100, ["628.0,14.0"]),
    ([[5, 50, 1, 1]], 10, 100, ["342.0,93.0"]),
])
def test_chart_points(timeline, span, top, expected):
    assert html.chart_points(timeline, span, top) == expected


def preflight_report():
    def ready(available):
        return {"ready": True, "checks": [{"name": "available_memory", "status": "ok", "message": "", "required_bytes": 8 * GIB}],
                "policy": {"min_available_memory": ["absolute", 8 * GIB]},
                "ansible_facts": {"gpufleet_memory": {"effective": {
                    "available_bytes": available, "available_human": "%dGi" % (available // GIB),
                    "total_bytes": 64 * GIB, "total_human": "64Gi", "limited_by": "host"}}}}
    failed = ready(2 * GIB)
    failed.update(ready=False, checks=[{"name": "available_memory", "status": "failed", "required_bytes": 8 * GIB,
                                        "message": "2Gi available < 8Gi <b>needed</b>"}])
    report = _report.build_report({"node1": ready(40 * GIB), "blackwell-builder-07": failed, "node3": None},
                                  finished="2026-12-01T10:00:00Z", run={"collection_version": "0.1.0", "limit": "node*"})
    report["gate"] = _gate.gate(report, "1")
    return report


def test_preflight_page():
    text = html.render_preflight_html(preflight_report())
    assert text.startswith(html.PREFLIGHT_SIGNATURE)
    assert_self_contained(text)
    tags = parse(text)
    assert [a.get("name") for t, a in tags if t == "meta"] == [None, "viewport"]
    assert len([a for t, a in tags if t == "svg" and a.get("class") == "fleet"]) == 1   # one chart, not one per node
    assert "Failures by check" in text and "available_memory" in text and "&lt;b&gt;needed&lt;/b&gt;" in text
    assert text.count('class="avail"') == 1 and text.count('class="below"') == 1   # node3 was unreachable: no bar
    assert 'class="required"' in text and "required 8.0Gi" in text                  # the minimum and its legend
    assert "No memory facts from 1 host: node3" in text
    assert "The gate stopped the run: 2 of 3 hosts are not ready or unreachable" in text
    assert "gpufleet.preflight 0.1.0; limit node*" in text
    assert ">1 ready<" in text and ">1 not ready<" in text and ">1 unreachable<" in text
    cells = [a for t, a in tags if t == "td" and (a.get("class") or "").startswith("c-")]
    assert len(cells) == 3 * 1                                                       # 3 hosts x 1 check


def test_memory_labels_are_cut_before_they_are_escaped():
    """Cut after escaping, blackwell-builder-07 read 'blackwell-' and a cut could fall inside an entity (issue 18
    item 14)."""
    assert html.label("blackwell-builder-07") == "blackwell-builder-07"
    assert html.label("a&b<c>d" * 4, 10) == u"a&b<c>da&\u2026"
    report = preflight_report()
    report["hosts"]["x&y<" * 7] = dict(report["hosts"]["node1"])
    text = html.render_preflight_html(report)
    assert "blackwell-builder-07" in text
    labels = re.findall(r'transform="rotate[^"]*">([^<]*)</text>', text)
    assert labels and not [l for l in labels if re.search(r"&(?!amp;|lt;|gt;|quot;|#)", l)], labels
    assert u"x&amp;y&lt;" * 5 + u"x&amp;y\u2026" in labels


def test_the_fleet_chart_sorts_hosts_by_available_memory():
    chart = html.fleet_memory_chart(preflight_report())
    assert [b["name"] for b in chart["bars"]] == ["blackwell-builder-07", "node1"]
    assert [b["below"] for b in chart["bars"]] == [True, False]
    assert chart["required"]["y"] < chart["bars"][0]["y"] and chart["missing"] == ["node3"]


def test_per_host_minimums_are_ticks_on_each_bar():
    report = preflight_report()
    report["hosts"]["node1"]["memory"]["required_bytes"] = 16 * GIB
    chart = html.fleet_memory_chart(report)
    assert chart["required"] is None and chart["per_host_required"] and all(b["need_y"] for b in chart["bars"])


def test_a_hostile_process_name_is_escaped_in_html():
    evil = u"ld.<img src=x onerror=alert(1)>\u202e"
    result = {"ready": False, "checks": [{"name": "build_processes", "status": "failed", "message": evil}],
              "ansible_facts": {"gpufleet_build_processes": {"count": 1, "processes": [
                  {"pid": 7, "name": evil, "orphaned": True, "zombie": False, "age_seconds": 5}]}}}
    text = html.render_preflight_html(_report.build_report({"n1": result}))
    assert_self_contained(text)
    assert "<img" not in text and u"\u202e" not in text
    assert "ld.&lt;img src=x onerror=alert(1)&gt;\\u202e" in text
    assert "<td class=\"num\">7</td><td>ld.&lt;img" in text and "<td>orphaned</td>" in text


def test_a_users_template_replaces_the_page(tmp_path):
    mine = tmp_path / "mine.html.j2"
    mine.write_text('{% extends "gpufleet_preflight.html.j2" %}{% block title %}Ours: {{ summary.total }}{% endblock %}')
    text = html.render_preflight_html(preflight_report(), str(mine))
    assert "<title>Ours: 3</title>" in text and "Failures by check" in text
    with pytest.raises(html.TemplateError) as err:
        html.render_preflight_html(preflight_report(), str(tmp_path / "missing.j2"))
    assert str(err.value) == "template: %s was not found" % (tmp_path / "missing.j2")
    (tmp_path / "bad.j2").write_text("{% if %}")
    with pytest.raises(html.TemplateError) as err:
        html.render_preflight_html(preflight_report(), str(tmp_path / "bad.j2"))
    assert str(err.value).startswith("template: %s line 1:" % (tmp_path / "bad.j2"))


def test_the_shipped_templates_escape_on_their_own():
    env = html.environment()
    assert env.autoescape is True
    assert env.from_string("{{ x }}").render(x="<b>") == "&lt;b&gt;"


def test_the_report_signatures_agree():
    """fleet_reports replaces an earlier preflight.html (and only that) by the signature _report keeps for it."""
    assert _report.SIGNATURES["preflight.html"] == html.PREFLIGHT_SIGNATURE.encode()
    assert view.REPORT_SIGNATURES["build.html"] == html.BUILD_SIGNATURE.encode()
    assert _report.is_own_report("preflight.html", html.render_preflight_html(preflight_report()).encode()[:256])


def test_a_peak_label_near_the_right_edge_stays_inside_the_chart():
    """A real build's last attempt peaked in its last interval: 'peak 249Mi' was cut at the chart's edge."""
    entry = {"timeline": [[0.0, MIB, 2, 1], [20.0, 249 * MIB, 2, 1]], "duration": 20.0, "memory_limit_bytes": 400 * MIB,
             "attempts": [{"attempt": 1, "jobs": 2, "peak_memory_bytes": 249 * MIB, "duration": 20.0}], "events": []}
    peak = html.memory_chart("n", entry)["peaks"][0]
    assert peak["anchor"] == "end" and peak["label_x"] < peak["x"]
    early = dict(entry, timeline=[[0.0, 249 * MIB, 2, 1], [20.0, MIB, 2, 1]])
    assert html.memory_chart("n", early)["peaks"][0]["anchor"] == "start"


@pytest.mark.parametrize("value, text", [
    (False, "false"), (True, "true"), (None, "(not set)"), ([], "[]"), (["build", "gpu"], '["build", "gpu"]'),
    (30, "30"), ("4GiB", "4GiB"), (["absolute", 4 * GIB], "4.0Gi"), (["fraction", 0.5], "0.5 of the effective total")])
def test_the_policy_table_shows_values_as_yaml_would(value, text):
    assert html.policy_items({"option": value}) == [("option", text)]


def test_the_lowest_hosts_of_500_are_visible_bars():
    """A host with 64 MiB of 64 GiB available drew a 0.3 px bar among 500."""
    def entry(available):
        return {"status": "ready", "memory": {"effective_available_bytes": available, "effective_total_bytes": 64 * GIB,
                                              "effective_available_human": "x", "effective_total_human": "64Gi"}}
    hosts = dict(("node%03d" % i, entry(64 * 1024 * 1024 if i < 10 else 40 * GIB)) for i in range(500))
    chart = html.fleet_memory_chart({"hosts": hosts})
    assert min(drawn["h"] for drawn in chart["bars"]) >= html.MIN_BAR_PX
    assert min(drawn["w"] for drawn in chart["bars"]) >= 1.0
    assert all(abs(drawn["y"] + drawn["h"] - chart["base"]) < 1e-6 for drawn in chart["bars"])
