# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the four preflight reports cost for 500 nodes (issue 20): target 2 s to write all four, and an HTML page
under 2 MB.

The results are tests/tools/reports500.py's: 500 nodes made of what a real 8-node run of the fleet registered
(healthy, GPU-less, a wedged GPU, an orphaned build process, an OOM kill, a memory-limited cgroup, unreachable).

1. In-process, what the fleet_reports action does once the results are in: build the report, decide the gate,
   render JSON, JUnit, Markdown and HTML and write them atomically (median of ``GPUFLEET_BENCH_REPEAT`` runs, each
   step timed too).
2. The same through Ansible: ``ansible-playbook`` of one fleet_reports task handed the 500 recorded results
   (``tests/tools/fleet_reports_recorded.yml``), wall time and its Python start-up included, next to the same
   playbook with 8 results.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import sys
import tempfile
import time

import benchlib
from ansible_collections.gpufleet.preflight.plugins.action import fleet_reports as action
from ansible_collections.gpufleet.preflight.plugins.action.readiness import returned_facts
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _gate, _html_report, _report

sys.path.insert(0, benchlib.FLEET_LIB_DIR)
import reports500  # noqa: E402 pylint: disable=wrong-import-position

BUDGET_SECONDS = 2.0
BUDGET_HTML_BYTES = 2 * 1000 * 1000


def write_all(results, directory):
    """The action's work after the results are in; ``{step: seconds}`` and ``{file: bytes}``."""
    times = {}
    start = time.perf_counter()
    report = _report.build_report(results, run=action.run_facts({}), finished=time.strftime("%Y-%m-%dT%H:%M:%SZ"))
    report["gate"] = _gate.gate(report, "10%")
    times["build report + gate"] = time.perf_counter() - start
    pages = []
    for name, render in (("preflight.json", _report.render_json), ("preflight.xml", _report.render_junit),
                         ("preflight.md", _report.render_markdown), ("preflight.html", _html_report.render_preflight_html)):
        began = time.perf_counter()
        pages.append((name, render(report)))
        times["render " + name] = time.perf_counter() - began
    began = time.perf_counter()
    for name, text in pages:
        action.write_atomically(directory, name, text, 0o644)
    times["write the four files"] = time.perf_counter() - began
    times["total"] = time.perf_counter() - start
    sizes = dict((name, os.path.getsize(os.path.join(directory, name))) for name, _text in pages)
    return times, sizes, report


def as_returned_now(results):
    """The recorded results (every gathered fact, as readiness returned them before issue 27 item 5) cut to what
    readiness returns by default now: the same verdicts, checks and policy, only the facts the reports read."""
    out = {}
    for name, result in results.items():
        if result and "ansible_facts" in result and "gpufleet_readiness" in result["ansible_facts"]:
            facts = dict(result["ansible_facts"])
            verdict = facts.pop("gpufleet_readiness")
            result = dict(result, ansible_facts=returned_facts(facts, verdict, full_facts=False))
        out[name] = result
    return out


def through_ansible(results, directory):
    path = os.path.join(directory, "results.json")
    with open(path, "w") as handle:
        json.dump(results, handle)
    playbook = os.path.join(benchlib.REPO_ROOT, ".venv", "bin", "ansible-playbook")
    seconds, proc = benchlib.timed([playbook, "-i", "localhost,", reports500.PLAYBOOK, "-e", "results_file=%s" % path,
                                    "-e", "report_dir=%s" % directory, "-e", "max_not_ready=10%"], timeout=600)
    if proc.returncode != 0:
        raise benchlib.BenchFailure("the playbook failed: %s" % benchlib.tail(proc.stdout + proc.stderr))
    return seconds


def main():
    info = benchlib.machine()
    repeat = benchlib.env_int("GPUFLEET_BENCH_REPEAT", 5, 1)
    nodes = benchlib.env_int("GPUFLEET_BENCH_NODES", 500, 50)
    results = reports500.fleet_results(nodes)
    directory = tempfile.mkdtemp(prefix="gpufleet-reports-bench-")
    try:
        benchlib.wait_for_low_load()
        runs = [write_all(results, directory) for dummy in range(repeat)]
        sizes, report = runs[-1][1], runs[-1][2]
        steps = dict((step, benchlib.median([r[0][step] for r in runs])) for step in runs[0][0])
        if report["summary"]["total"] != nodes:
            raise benchlib.BenchFailure("the report holds %d hosts of %d" % (report["summary"]["total"], nodes))
        playbook = through_ansible(results, directory)
        lean = as_returned_now(results)
        playbook_lean = through_ansible(lean, directory)
        small = through_ansible(reports500.fleet_results(8), tempfile.mkdtemp(dir=directory))
        small_lean = through_ansible(as_returned_now(reports500.fleet_results(8)), tempfile.mkdtemp(dir=directory))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    rows = [(step, benchlib.fmt_seconds(seconds)) for step, seconds in steps.items()]
    per_host = dict((label, len(json.dumps(data)) // nodes) for label, data in (("full", results), ("lean", lean)))
    rows.append(("ansible-playbook, one fleet_reports task, %d nodes, results with every fact (%s B/host, before; wall)"
                 % (nodes, "{:,}".format(per_host["full"])), benchlib.fmt_seconds(playbook)))
    rows.append(("ansible-playbook, one fleet_reports task, %d nodes, results as readiness returns them now (%s B/host; wall)"
                 % (nodes, "{:,}".format(per_host["lean"])), benchlib.fmt_seconds(playbook_lean)))
    rows.append(("ansible-playbook, one fleet_reports task, 8 nodes, every fact / now (wall)",
                 "%s / %s" % (benchlib.fmt_seconds(small), benchlib.fmt_seconds(small_lean))))
    table = benchlib.markdown_table(["%d nodes: step (median of %d)" % (nodes, repeat), "seconds"], rows)
    table += "\n\n" + benchlib.markdown_table(["file", "bytes"], [(name, "{:,}".format(size)) for name, size in sorted(sizes.items())])
    notes = ["%d of %d hosts not ready or unreachable; the gate: %s" % (report["gate"]["not_ready"], nodes, report["gate"]["decision"]),
             "the playbook's extra time over the in-process total is Ansible's: start-up, and templating the "
             "results (%s of JSON) into the task's arguments" % "{:,} bytes".format(len(json.dumps(results)))]
    targets = [("all four reports written in <= %.0f s" % BUDGET_SECONDS, steps["total"] <= BUDGET_SECONDS,
                "%.2f s" % steps["total"]),
               ("preflight.html <= 2 MB", sizes["preflight.html"] <= BUDGET_HTML_BYTES,
                "{:,} bytes".format(sizes["preflight.html"]), True)]
    return benchlib.report("reports_500", "Reports for %d nodes" % nodes, info, table, notes,
                           dict(steps=steps, sizes=sizes, playbook_seconds=playbook, playbook_lean_seconds=playbook_lean,
                                playbook_8_seconds=small, playbook_8_lean_seconds=small_lean, result_bytes_per_host=per_host),
                           targets)


if __name__ == "__main__":
    benchlib.main_wrapper(main)
