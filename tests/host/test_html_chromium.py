# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The build report's and the preflight report's HTML pages in a real headless Chromium (Debian's package,
tests/system-deps.sh): a screenshot is taken and is not blank, and the browser's own network log shows it fetched
nothing but the page itself.

The preflight pages are the real fleet_reports action's (an ansible-playbook run of
tests/tools/fleet_reports_recorded.yml) for the results a real 8-node run registered (tests/tools/recorded/) and for
500 nodes made of them (tests/tools/reports500.py: unreachable, GPU-less, wedged GPU, orphans, OOM, memory-limited
nodes mixed in), at 1400 and 700 px wide: the DOM holds a grid cell per host and check, every failing host is named
once per check group, one fleet memory chart, and the 500-node page prints on a few pages (it was over 20,000 px).

GPUFLEET_DOC_IMAGES=1 also copies the screenshots to docs/images (README's build picture is the page
tests/fleet/test_build_view_fleet.py's real build wrote, taken with the same chromium command)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import struct
import subprocess
import sys

import pytest

from conftest import CHROMIUM, chromium, non_white_share
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._timeline import Timeline
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _build_view as view
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _html_report as html

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "tools"))
import reports500  # noqa: E402 pylint: disable=wrong-import-position
MIB = 1024 ** 2
GIB = 1024 ** 3
NODES = ["node%d" % index for index in range(1, 9)]
BACKING_OFF = ("node3", "node6")

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (tests/system-deps.sh)")


def build_report():
    """Eight nodes of the hungry build as the fleet test runs it: two back off from 4 jobs to 2."""
    nodes = {}
    for index, name in enumerate(NODES):
        timeline = Timeline(capacity=240)
        attempts = []
        clock = 0.0
        plan = [4, 2] if name in BACKING_OFF else [2]
        for number, jobs in enumerate(plan, 1):
            oom = number < len(plan)
            length = 6.0 if oom else 14.0 + index % 3
            start = clock
            while clock < start + length:
                phase = (clock - start) % 2.0
                memory = min(400 * MIB, jobs * 120 * MIB * min(1.0, phase / 0.4)) + 8 * MIB
                timeline.add(clock, memory, jobs, number)
                clock += 0.5
            attempts.append({"attempt": number, "jobs": jobs, "oom": oom, "kind": "oom" if oom else "ok",
                             "oom_kills": 1 if oom else 0, "duration": length, "failed_steps": [],
                             "peak_memory_bytes": 400 * MIB if oom else jobs * 120 * MIB + 8 * MIB,
                             "why": "the build cgroup's oom_kill counter rose by 1" if oom else "exit status 0"})
        nodes[name] = {"status": {"state": "succeeded", "memory_limit_bytes": 400 * MIB, "timeline": timeline.to_list()},
                       "result": {"failed": False, "attempts": attempts, "final_jobs": 2, "duration": clock}}
    return view.build_report(nodes, finished="2026-12-01T10:00:00Z")


def page_requests(netlog):
    """Every URL the page asked for, from the browser's own network log (--log-net-log): requests with a page as
    their initiator (a file:// page's origin is ``null``); the browser's background requests ("not an origin")
    are its own, not the page's."""
    with open(netlog) as handle:
        text = handle.read()
    try:
        log = json.loads(text)
    except ValueError:  # a log cut short when the browser quit: close it
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    names = dict((number, name) for name, number in log["constants"]["logEventTypes"].items())
    urls = set()
    for event in log.get("events", []):
        params = event.get("params") or {}
        if names.get(event["type"]) == "URL_REQUEST_START_JOB" and params.get("initiator") != "not an origin":
            urls.add(params.get("url") or "")
    return urls


def test_the_network_check_sees_what_a_page_fetches(tmp_path):
    """The control: a page with one image on a (closed) loopback port - the net log must show that request."""
    page = str(tmp_path / "control.html")
    with open(page, "w") as handle:
        handle.write('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">control</body></html>')
    netlog = str(tmp_path / "net.json")
    chromium(page, "--screenshot=%s" % str(tmp_path / "control.png"), "--window-size=400,300",
             "--log-net-log=%s" % netlog)
    assert "http://127.0.0.1:9/x.png" in page_requests(netlog)


def test_build_page_renders_in_chromium(tmp_path):
    page = str(tmp_path / "build.html")
    with open(page, "w") as handle:
        handle.write(html.render_build_html(build_report()))
    shot = str(tmp_path / "build.png")
    netlog = str(tmp_path / "net.json")
    proc = chromium(page, "--screenshot=%s" % shot, "--window-size=1000,2400", "--hide-scrollbars", "--log-net-log=%s" % netlog)
    assert os.path.exists(shot), proc.stderr[-3000:]
    share = non_white_share(shot)
    assert share > 0.02, "the screenshot is (nearly) blank: %.4f of its pixels are not white" % share
    outside = [url for url in page_requests(netlog) if url and not url.startswith(("file://", "data:", "about:"))]
    assert not outside, "the page fetched %s" % outside
    dom = chromium(page, "--dump-dom").stdout
    assert dom.count('<svg class="chart"') == 8, dom[:3000]
    assert dom.count('class="peak"') == 10 and dom.count('class="jobs"') == 8   # 2 nodes with 2 attempts


@pytest.fixture(scope="module")
def preflight_pages(tmp_path_factory):
    """``{nodes: (report dir, results)}``: the real fleet_reports action's reports for 8 recorded and 500 nodes."""
    base = tmp_path_factory.mktemp("preflight-pages")
    pages = {}
    for count, results in ((8, reports500.recorded()), (500, reports500.fleet_results(500))):
        source = str(base / ("results-%d.json" % count))
        with open(source, "w") as handle:
            json.dump(results, handle)
        report_dir = str(base / ("reports-%d" % count))
        run = subprocess.run([os.path.join(REPO, ".venv", "bin", "ansible-playbook"), "-i", "localhost,", reports500.PLAYBOOK,
                              "-e", "results_file=%s" % source, "-e", "report_dir=%s" % report_dir, "-e", "max_not_ready=10%"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False, cwd=REPO)
        assert run.returncode == 0, run.stdout[-3000:]
        pages[count] = (report_dir, results)
    return pages


@pytest.mark.parametrize("count, width", [(8, 1400), (8, 700), (500, 1400), (500, 700)])
def test_preflight_page_renders_in_chromium(tmp_path, preflight_pages, count, width):
    page = os.path.join(preflight_pages[count][0], "preflight.html")
    shot = str(tmp_path / ("preflight-%d-%d.png" % (count, width)))
    netlog = str(tmp_path / "net.json")
    proc = chromium(page, "--screenshot=%s" % shot, "--window-size=%d,2200" % width, "--hide-scrollbars",
                    "--log-net-log=%s" % netlog)
    assert os.path.exists(shot), proc.stderr[-3000:]
    assert png_pixels_size(shot) == (width, 2200)
    outside = [url for url in page_requests(netlog) if url and not url.startswith(("file://", "data:", "about:"))]
    assert not outside, "the page fetched %s" % outside
    if os.environ.get("GPUFLEET_DOC_IMAGES") and (count == 500 or width == 1400):
        name = "preflight-report%s%s.png" % ("-500" if count == 500 else "", "-narrow" if width == 700 else "")
        shutil.copy(shot, os.path.join(REPO, "docs", "images", name))


@pytest.mark.parametrize("count", [8, 500])
def test_preflight_page_dom(preflight_pages, count):
    report_dir, results = preflight_pages[count]
    with open(os.path.join(report_dir, "preflight.json")) as handle:
        report = json.load(handle)
    dom = chromium(os.path.join(report_dir, "preflight.html"), "--dump-dom").stdout
    checks = set(c["name"] for entry in report["hosts"].values() for c in entry["checks"])
    cells = re.findall(r'<td class="c-(ok|failed|unknown|skipped|none)"', dom)
    assert len(cells) == count * len(checks), (len(cells), count, len(checks))
    assert len(re.findall(r'<svg class="fleet"', dom)) == 1 and '<svg class="chart"' not in dom
    # failures grouped by check: every failing host named exactly once in each group it belongs to
    groups = re.findall(r'<section class="group[^"]*" data-checks="([^"]*)">(.*?)</section>', dom, re.S)
    assert groups
    failing = dict((name, set(e["failed_checks"]) or {"reachable"}) for name, e in report["hosts"].items() if e["status"] != "ready")
    seen = {}
    for names, body in groups:
        hosts = [h for bold in re.findall(r"<b>([^<]*)</b>", body) for h in bold.split(", ")]
        assert len(hosts) == len(set(hosts)), (names, hosts)
        for host in hosts:
            seen.setdefault(host, set()).update(names.split(","))
    assert seen == failing
    assert "The gate stopped the run: " in dom
    if count == 500:
        kinds = reports500.kinds_of(results)
        assert set(kinds) == set(kind for _n, kind, _s in reports500.KINDS), sorted(kinds)


def test_the_500_node_page_prints_on_a_few_pages(tmp_path, preflight_pages):
    """One chart per node stacked made it over 20,000 px; the grid and the host table fold above 50 hosts."""
    pdf = str(tmp_path / "page.pdf")
    chromium(os.path.join(preflight_pages[500][0], "preflight.html"), "--no-pdf-header-footer", "--print-to-pdf=%s" % pdf)
    with open(pdf, "rb") as handle:
        pages = [int(n) for n in re.findall(rb"/Count (\d+)", handle.read())]
    assert pages and max(pages) <= 4, pages


def png_pixels_size(path):
    with open(path, "rb") as handle:
        head = handle.read(24)
    return struct.unpack(">II", head[16:24])
