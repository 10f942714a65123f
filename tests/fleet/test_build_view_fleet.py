# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/build_sgl_kernel.yml on the 8-node fleet with the memory-hungry test project (issue 14): two nodes
start with too many jobs and back off; the live view (gpufleet.preflight.build_watch) shows every row progressing,
the two backoffs and the finish in one table per poll; the build report is written; a second build plans from the
memory per thread the first one measured."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import re
import threading
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_plan
from fleetlib import REPO_ROOT, TIMINGS, run_playbook
from conftest import BACKING_OFF, PHASES, build_vars, hungry_source, status_of, wait_for

PLAYBOOK = os.path.join(REPO_ROOT, "playbooks", "build_sgl_kernel.yml")


def test_live_view_shows_every_node_the_backoffs_and_the_finish(fleet, tmp_path):
    source = hungry_source(tmp_path)
    report_dir = str(tmp_path / "reports")
    result = run_playbook(PLAYBOOK, fleet.inventory_path, timeout=900,
                          extra_vars=build_vars(tmp_path, source, sgl_kernel_report_dir=report_dir))
    out = result.stdout + result.stderr
    TIMINGS["build_view_fleet_playbook_seconds"] = result.duration
    TIMINGS["build_view_fleet_output_lines"] = len(result.stdout.splitlines())
    if os.environ.get("GPUFLEET_BUILD_VIEW_OUT"):  # keep the run's output (docs/benchmarks.md measures it)
        with open(os.environ["GPUFLEET_BUILD_VIEW_OUT"], "w") as handle:
            handle.write(result.stdout)
    assert result.rc == 0, out[-6000:]
    tables = re.findall(r"^BUILD .*?(?=^\S.*\n\n|\Z)", result.stdout, re.M | re.S)
    assert tables, result.stdout[-4000:]
    assert "async_status" not in result.stdout and "Ask whether the build has finished" not in result.stdout
    names = ["node%d" % index for index in range(1, 9)]
    for name in names:
        rows = re.findall(r"^%s +(%s) +(.*)$" % (name, "|".join(PHASES)), result.stdout, re.M)
        phases = [phase for phase, dummy in rows]
        assert "compiling" in phases, (name, rows)
        assert phases[-1] == "done", (name, rows)
    for name in BACKING_OFF:
        assert re.search(r"^%s +\S+.* 2 \(1 backoff\) " % name, result.stdout, re.M), result.stdout[-5000:]
    assert re.search(r"^BUILD \S+: 8 done \(of 8\)$", result.stdout, re.M), result.stdout[-5000:]
    with open(os.path.join(report_dir, "build.json")) as handle:
        report = json.load(handle)
    assert sorted(report["nodes"]) == names
    assert report["summary"]["backoffs"] == 2
    assert all(len(report["nodes"][name]["timeline"]) >= 2 for name in names)
    html = open(os.path.join(report_dir, "build.html")).read()
    assert html.count('class="chart"') == 8 and "http://" not in html and "https://" not in html


def test_second_build_plans_from_the_measurement_and_a_lost_node_does_not_stop_the_others(fleet, tmp_path):
    """Three nodes build twice in the same directories. The first plan has no measurement: the default memory per
    thread. The second plans from what the first measured (its reason says so). During the second, node3's
    namespace is killed (sshd and build with it): its row turns unreachable, node1 and node2 finish."""
    source = hungry_source(tmp_path)
    common = dict(sgl_kernel_hosts="node1:node2:node3", sgl_kernel_jobs=0, sgl_kernel_memory_per_thread="100MiB",
                  sgl_kernel_min_memory_per_thread="64MiB", sgl_kernel_report_dir="")
    first = run_playbook(PLAYBOOK, fleet.inventory_path, timeout=600, extra_vars=build_vars(tmp_path, source, **common))
    assert first.rc == 0, (first.stdout + first.stderr)[-6000:]
    assert re.search(r"jobs=\d+: \S+ available - \S+ reserve over 1 thread x 100Mi \(memory allows", first.stdout), \
        first.stdout[-6000:]
    stamp_path = os.path.join(str(tmp_path), "src-node1", "build", ".gpufleet-build.stamp")
    with open(stamp_path) as handle:
        measured = json.load(handle)["measured"]["memory_per_thread_bytes"]
    assert 100 * 1024 ** 2 <= measured <= 140 * 1024 ** 2, measured    # a 120 MiB step per thread, plus the shell
    for name in ("node1", "node2", "node3"):  # make ninja compile again (the stamp stays)
        for path in glob.glob(os.path.join(str(tmp_path), "src-%s" % name, "build", "unit_*.o")):
            os.unlink(path)
    outcome = {}

    def second_run():
        outcome["result"] = run_playbook(PLAYBOOK, fleet.inventory_path, timeout=600,
                                         extra_vars=build_vars(tmp_path, source, **common))

    runner = threading.Thread(target=second_run)
    started = time.time()
    runner.start()
    try:
        wait_for(lambda: (status_of(tmp_path, "node3").get("progress") or {}).get("done", 0) >= 2
                 and status_of(tmp_path, "node3").get("updated_at", 0) > started, 300, "node3's second build to compile")
        fleet["node3"].stop_sshd()
    finally:
        runner.join(600)
    second = outcome["result"]
    out = second.stdout + second.stderr
    if os.environ.get("GPUFLEET_BUILD_VIEW_OUT"):
        with open(os.environ["GPUFLEET_BUILD_VIEW_OUT"] + ".learned", "w") as handle:
            handle.write(first.stdout + "\n=== second build ===\n" + second.stdout)
    shown = "%s/thread + 25%%" % _build_plan._short(measured)  # the plan rounds (124.6Mi is 125Mi), as it prints
    assert re.search(r"over 1 thread x \S+ \(measured %s, not the default 100Mi\)" % re.escape(shown), second.stdout), \
        second.stdout[-6000:]
    assert re.search(r"^node3 +unreachable ", second.stdout, re.M), second.stdout[-6000:]
    for name in ("node1", "node2"):
        rows = re.findall(r"^%s +(%s) " % (name, "|".join(PHASES)), second.stdout, re.M)
        assert rows and rows[-1] == "done", (name, rows, out[-4000:])
    assert re.search(r"node3 became unreachable during the build", out), out[-4000:]
    recap = dict(re.findall(r"^(node\d)\s*:\s*ok=\d+\s+changed=\d+\s+unreachable=\d+\s+failed=(\d+)", second.stdout, re.M))
    assert recap.get("node1") == "0" and recap.get("node2") == "0" and recap.get("node3") == "1", second.stdout[-3000:]
