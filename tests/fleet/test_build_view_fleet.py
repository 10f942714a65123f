# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/build_sgl_kernel.yml on the 8-node fleet with the memory-hungry test project (issue 14): two nodes
start with too many jobs and back off; the live view (gpufleet.preflight.build_watch) shows every row progressing,
the two backoffs and the finish in one table per poll; the build report is written; a second build plans from the
memory per thread the first one measured."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil

from fleetlib import REPO_ROOT, TIMINGS, run_playbook

PHASES = ("queued", "configuring", "compiling", "linking", "installing", "done", "failed", "unreachable")

PLAYBOOK = os.path.join(REPO_ROOT, "playbooks", "build_sgl_kernel.yml")
HUNGRY = os.path.join(REPO_ROOT, "tests", "projects", "hungry")
BACKING_OFF = ("node3", "node6")
STEPS = 12


def hungry_source(tmp_path):
    """The hungry project with the pyproject.toml the role looks for (it builds with sgl_kernel_build_command)."""
    source = str(tmp_path / "hungry")
    shutil.copytree(HUNGRY, source)
    with open(os.path.join(source, "pyproject.toml"), "w") as handle:
        handle.write("[project]\nname = \"hungry\"\nversion = \"0\"\n")
    return source


def build_vars(tmp_path, source, **more):
    """Every node builds 12 steps of 120 MiB x 2 s under a 400 MiB limit: 2 jobs fit; the two BACKING_OFF nodes
    start at 4 jobs (480 MiB), are OOM-killed and resume with 2."""
    variables = {
        "sgl_kernel_gate": False,
        "sgl_kernel_build_deps": False,
        "sgl_kernel_install": False,
        "sgl_kernel_source_type": "controller",
        "sgl_kernel_controller_src": source,
        "sgl_kernel_checkout_dir": str(tmp_path) + "/src-{{ inventory_hostname }}",
        "sgl_kernel_subdir": "",
        "sgl_kernel_venv": os.path.join(REPO_ROOT, ".venv"),
        "sgl_kernel_target_archs": "all",
        "sgl_kernel_build_command": ["/bin/sh", "-c", "cmake -S . -B build -G Ninja -DHOG_MIB=120 -DHOG_SECONDS=2 "
                                     "-DHOG_STEPS=%d >/dev/null && cmake --build build" % STEPS],
        "sgl_kernel_memory_limit": "400MiB",
        "sgl_kernel_memory_per_thread": "100MiB",
        "sgl_kernel_jobs": "{{ 4 if inventory_hostname in %s else 2 }}" % list(BACKING_OFF),
        "sgl_kernel_poll_interval": 2,
        "sgl_kernel_async": 900,
    }
    variables.update(more)
    return variables


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
