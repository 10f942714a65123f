# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The build report's and the preflight report's HTML pages in a real headless Chromium (Debian's package,
tests/system-deps.sh): a screenshot is taken and is not blank, the rendered DOM holds one chart per node, and the
browser's own network log shows it fetched nothing but the page itself.

GPUFLEET_DOC_IMAGES=1 also copies the preflight screenshot to docs/images (README's build picture is the page
tests/fleet/test_build_view_fleet.py's real build wrote, taken with the same chromium command)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import struct
import subprocess
import tempfile
import zlib

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._timeline import Timeline
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _build_view as view
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _html_report as html
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _report

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
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


def preflight_report():
    results = {}
    for index, name in enumerate(NODES):
        available = (48 - 5 * index) * GIB
        ready = available >= 16 * GIB
        results[name] = {
            "ready": ready,
            "checks": [{"name": "min_available_memory", "status": "passed" if ready else "failed",
                        "message": "%dGi available, %s 16Gi" % (available // GIB, ">=" if ready else "below")}],
            "ansible_facts": {"gpufleet_memory": {"effective": {
                "available_bytes": available, "available_human": "%dGi" % (available // GIB),
                "total_bytes": 64 * GIB, "total_human": "64Gi", "limited_by": "cgroup"},
                "host": {"total_human": "449Gi"}}, "gpufleet_build_processes": {"count": 0}}}
    results["node8"] = None
    return _report.build_report(results, finished="2026-12-01T10:00:00Z")


def chromium(page, *args):
    profile = tempfile.mkdtemp(prefix="gpufleet-chromium-")
    try:
        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--user-data-dir=%s" % profile] + list(args) + ["file://" + page]
        return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=120, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB/RGBA PNG, decoded with zlib and the PNG filters."""
    with open(path, "rb") as handle:
        data = handle.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    offset, idat, header = 8, b"", None
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        chunk = data[offset + 8:offset + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        offset += 12 + length
    width, height, depth, color = header[:4]
    assert depth == 8 and color in (2, 6), "an 8-bit RGB or RGBA PNG, got depth %d color type %d" % (depth, color)
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            upper_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - upper_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - upper_left)
                pred = left if pa <= pb and pa <= pc else (up if pb <= pc else upper_left)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def non_white_share(path):
    width, height, channels, rows = png_pixels(path)
    coloured = 0
    for row in rows:
        for x in range(0, width * channels, channels):
            if min(row[x:x + 3]) < 200:
                coloured += 1
    return float(coloured) / (width * height)


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


@pytest.mark.parametrize("name, render, report, charts", [
    ("build", html.render_build_html, build_report, 8),
    ("preflight", html.render_preflight_html, preflight_report, 8),
])
def test_page_renders_in_chromium(tmp_path, name, render, report, charts):
    page = str(tmp_path / ("%s.html" % name))
    with open(page, "w") as handle:
        handle.write(render(report()))
    height = 2400 if name == "build" else 1000
    shot = str(tmp_path / ("%s.png" % name))
    netlog = str(tmp_path / "net.json")
    proc = chromium(page, "--screenshot=%s" % shot, "--window-size=1000,%d" % height, "--hide-scrollbars",
                    "--log-net-log=%s" % netlog)
    assert os.path.exists(shot), proc.stderr[-3000:]
    share = non_white_share(shot)
    assert share > 0.02, "the screenshot is (nearly) blank: %.4f of its pixels are not white" % share
    outside = [url for url in page_requests(netlog) if url and not url.startswith(("file://", "data:", "about:"))]
    assert not outside, "the page fetched %s" % outside

    dom = chromium(page, "--dump-dom").stdout
    assert dom.count('<svg class="chart"') == charts, dom[:3000]
    assert "http://" not in dom and "https://" not in dom
    if os.environ.get("GPUFLEET_DOC_IMAGES") and name == "preflight":  # README's build picture is a real fleet build's
        shutil.copy(shot, os.path.join(REPO, "docs", "images", "%s-report.png" % name))
