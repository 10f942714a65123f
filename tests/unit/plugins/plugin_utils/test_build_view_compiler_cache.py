# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The build report's compiler-cache line (issue 22): from guarded_build's result, in build.json, Markdown and HTML."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _build_view as view
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _html_report as html

CACHE = {"kind": "ccache", "version": "4.7.5", "hits": 40, "misses": 2, "compiles": 42, "hit_rate": 0.952,
         "size_bytes": 2 << 20, "max_size_bytes": 1 << 30,
         "summary": "ccache: 40 of 42 compiles from the cache (95%), cache 2.0Mi of 1.0Gi"}


def nodes(cache):
    return {"node1": {"status": {"state": "succeeded", "attempts": [], "jobs": 2},
                      "result": {"msg": "built", "final_jobs": 2, "duration": 3.0, "compiler_cache": cache}}}


def test_the_report_carries_hits_hit_rate_and_size():
    report = view.build_report(nodes(CACHE))
    entry = report["nodes"]["node1"]["compiler_cache"]
    assert (entry["hits"], entry["misses"], entry["hit_rate"], entry["size_bytes"]) == (40, 2, 0.952, 2 << 20)
    assert entry["size_human"] == "2.0Mi" and entry["kind"] == "ccache"
    assert "Compiler cache: ccache: 40 of 42 compiles from the cache (95%)" in view.render_markdown(report)
    assert "Compiler cache: ccache: 40 of 42 compiles from the cache (95%)" in html.render_build_html(report)
    assert '"hit_rate": 0.952' in view.render_json(report)


def test_no_cache_no_line_and_odd_values_dropped():
    for cache in (None, {"kind": "none"}, "ccache", {"kind": "other"}):
        report = view.build_report(nodes(cache))
        assert report["nodes"]["node1"]["compiler_cache"] is None
        assert "Compiler cache" not in view.render_markdown(report) + html.render_build_html(report)
    odd = dict(CACHE, hits="many", hit_rate=True, summary=["<b>"])
    entry = view.build_report(nodes(odd))["nodes"]["node1"]["compiler_cache"]
    assert entry["hits"] is None and entry["hit_rate"] is None and entry["summary"] == "ccache"


def test_the_summary_is_escaped_in_html():
    page = html.render_build_html(view.build_report(nodes(dict(CACHE, summary="<script>x</script>"))))
    assert "<script>x</script>" not in page and "&lt;script&gt;" in page
