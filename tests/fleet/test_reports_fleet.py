# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reports of a real run of the preflight role on a faulty 8-node fleet (issue 20, issue 18 item 13).

node1, node2: healthy (8 stub Blackwell GPUs). node3: no nvidia-smi at all (GPU-less). node4: a wedged driver
(nvidia-smi hangs). node5: an orphaned process named ``ld.<img src=x onerror=alert(1)>`` + U+202E (the default
``ld.*`` glob matches it). node6: a real OOM kill in its cgroup. node7: a 2 GiB cgroup where 4 GiB are required.
node8: sshd stopped. preflight_max_not_ready=50% stops the run (6 of 8).

The registered results are kept (``GPUFLEET_RECORD=1`` writes them to tests/tools/recorded/, where
tests/tools/reports500.py makes 500 nodes of them for the Chromium test and bench/reports_500.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
from xml.etree import ElementTree

from fleetlib import REPO_ROOT, TIMINGS, install_gpus, run_playbook

PLAYBOOK = os.path.join(REPO_ROOT, "tests", "fleet", "reports_record.yml")
RECORDED = os.path.join(REPO_ROOT, "tests", "tools", "recorded", "preflight_8_nodes.json")
HOSTILE = u"ld.<img src=x onerror=alert(1)>\u202e"
GIB = 1024 ** 3


def test_reports_of_a_real_faulty_fleet(fresh_fleet, tmp_path):
    fleet = fresh_fleet(8)
    for node in fleet.nodes:
        if node.name == "node4":
            install_gpus(node, hang=True)
        elif node.name != "node3":
            install_gpus(node)
    pid = fleet["node5"].spawn_orphan(HOSTILE)
    fleet["node6"].trigger_oom()
    fleet["node7"].set_memory_limit(2 * GIB)
    fleet["node8"].stop_sshd()
    record = str(tmp_path / "results.json")
    build_path = os.path.join(fleet.dir, "build")
    os.makedirs(build_path)
    result = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars={
        "preflight_profiles": ["build", "gpu"], "preflight_build_path": build_path, "preflight_min_free_disk": "1GiB",
        "preflight_min_available_memory": "4GiB", "preflight_gpu_timeout": 3, "preflight_oom_window_minutes": 3,
        "preflight_max_not_ready": "50%", "preflight_report_dir": str(tmp_path / "reports"), "record_path": record})
    TIMINGS["reports_fleet_8_nodes"] = result.duration
    out = result.stdout + result.stderr
    assert "Traceback" not in out, out[-3000:]
    reports = tmp_path / "reports"
    report = json.loads((reports / "preflight.json").read_text())
    not_ready = sorted(name for name, entry in report["hosts"].items() if entry["status"] != "ready")
    reasons = json.dumps(dict((n, e["reason"]) for n, e in report["hosts"].items()), indent=1)
    assert not_ready[-6:] == ["node3", "node4", "node5", "node6", "node7", "node8"], reasons
    # A healthy node fails only when another test on this machine had a global OOM kill in the last 3 minutes.
    for name in set(not_ready) - {"node3", "node4", "node5", "node6", "node7", "node8"}:
        assert report["hosts"][name]["failed_checks"] == ["recent_oom"], reasons

    # The gate's decision, in every report.
    why = "%d of 8 hosts are not ready or unreachable, more than preflight_max_not_ready=50%% (4 of 8 hosts) allows" % len(not_ready)
    assert report["gate"]["decision"] == "stop" and report["gate"]["reason"] == why
    assert "Gate: STOPPED THE RUN - %s" % why in result.stdout
    assert "Gate: STOPPED THE RUN" in (reports / "preflight.md").read_text()
    gate = [s for s in ElementTree.parse(str(reports / "preflight.xml")).getroot() if s.get("name") == "gate"][0]
    assert gate.get("failures") == "1"
    page = (reports / "preflight.html").read_text()
    assert "The gate stopped the run: %s" % why in page

    # The hostile process name: escaped Markdown and HTML, no bidi override anywhere, shown with pid and state.
    for name in ("preflight.md", "preflight.html", "preflight.json", "preflight.xml"):
        text = (reports / name).read_text()
        assert u"\u202e" not in text and "\\u202e" in text, name
        if name != "preflight.json":  # JSON is data: its readers escape for where they put it
            assert "<img" not in text.replace("\\<img", ""), name
    assert u"\u202e" not in result.stdout
    assert "ld.&lt;img src=x onerror=alert(1)&gt;\\u202e" in page
    assert re.search(r"<td>node5</td><td class=\"num\">%d</td><td>ld\.&lt;img[^<]*</td><td>orphaned</td>" % pid, page), page
    assert "| node5 | %d | ld.\\<img src=x onerror=alert(1)\\>\\\\u202e | orphaned |" % pid in (reports / "preflight.md").read_text()

    # The GPU-less node's GPU checks fail with one message: said once in its group.
    groups = re.findall(r'<section class="group[^"]*" data-checks="([^"]*)">(.*?)</section>', page, re.S)
    node3 = [(checks, body) for checks, body in groups if "node3" in body]
    assert len(node3) == 1 and len(node3[0][0].split(",")) >= 3, groups
    # every failing node named once per check group
    for checks, body in groups:
        named = [n for bold in re.findall(r"<b>([^<]*)</b>", body) for n in bold.split(", ")]
        assert len(named) == len(set(named)), (checks, named)

    with open(record) as handle:
        recorded = json.load(handle)
    assert sorted(recorded) == ["node%d" % i for i in range(1, 9)] and recorded["node8"]["unreachable"]
    if os.environ.get("GPUFLEET_RECORD"):
        os.makedirs(os.path.dirname(RECORDED), exist_ok=True)
        shutil.copy(record, RECORDED)
