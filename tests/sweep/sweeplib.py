# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bad-input sweep: every case of tests/sweep/cases/*.yml run through Ansible, judged from its result.

A case is data (see tests/sweep/README.md): a plugin, the arguments (or role variables) with one bad value,
and the option whose name the failure message must carry. Cases are batched: one ansible-playbook run holds
many tasks (``ignore_errors``, a per-task ``timeout``), a callback (``callback_plugins/sweep_record.py``)
writes every result as a JSON line, and :func:`judge` decides per case:

- ``exception``: an unhandled exception - a module that crashed with a traceback, or a controller-side
  exception of a non-Ansible type that left the collection's code (ansible-core wrapped it, not the plugin);
- ``hang``: the task ran past its timeout (or the batch past its own), or no result came back;
- ``nameless``: it failed, but the message does not name the option at fault; or it was accepted although
  the table says it must be refused;
- ``ok``: refused naming the option, or accepted as the table documents (``accept`` with a ``meaning``).

Run it with ``python tests/sweep/sweeplib.py [-k substring] [-v]`` or through ``tests/sweep/test_sweep.py``.

The sweep lives in modules of one concern each, beside this one (the run, the report and the command line are here;
this module re-exports the rest):

    sweep_cases.py      the table: loading, expanding and checking the cases
    sweep_playbooks.py  the cases as playbooks, and the ansible-playbook runs
    sweep_judge.py      each case's verdict from its recorded results
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import yaml

from sweep_cases import (CASES_DIR, COLLECTION, DEFAULT_TIMEOUT, HERE, KINDS, REPO, STUB_NAME, TYPE_PROBES, XFAIL,
                         CaseError, expand_group, load_cases, load_xfail, role_specs)
from sweep_playbooks import (Unsafe, environment, make_fixtures, play_for_role, protect, realize, run_batch,
                             run_playbook_case, task_for, write_batch)
from sweep_judge import judge, message_of, unhandled

__all__ = ["CASES_DIR", "COLLECTION", "DEFAULT_TIMEOUT", "HERE", "KINDS", "REPO", "STUB_NAME", "TYPE_PROBES", "XFAIL",
           "CaseError", "expand_group", "load_cases", "load_xfail", "role_specs", "Unsafe", "environment",
           "make_fixtures", "play_for_role", "protect", "realize", "run_batch", "run_playbook_case", "task_for",
           "write_batch", "judge", "message_of", "unhandled", "plan_batches", "start_stub", "run_sweep", "summarize",
           "per_plugin", "report", "main"]


# ---------------------------------------------------------------- the run

def plan_batches(cases, workers):
    """Isolated cases alone; the rest split into ``workers`` x 2 batches balanced by kind."""
    alone = [c for c in cases if c["isolate"]]
    rest = [c for c in cases if not c["isolate"]]
    count = max(1, workers * 2)
    batches = [[] for dummy in range(count)]
    for position, case in enumerate(rest):
        batches[position % count].append(case)
    out = [("batch%02d" % i, batch) for i, batch in enumerate(batches) if batch]
    out.extend(("alone%03d" % i, [case]) for i, case in enumerate(alone))
    return out


def start_stub(root):
    """A copy of /bin/sleep named like a build tool, the only process reaping cases may end for real."""
    path = os.path.join(root, STUB_NAME)
    shutil.copy("/bin/sleep", path)
    return subprocess.Popen([path, "900"], start_new_session=True)


def run_sweep(cases, workers=3, keep=False, log=print):
    root = tempfile.mkdtemp(prefix="gpufleet-sweep-")
    for sub in ("tmp", "ansible-local", "ansible-remote"):
        os.makedirs(os.path.join(root, sub))
    make_fixtures(root)
    with open(os.path.join(root, "inventory.yml"), "w") as handle:
        yaml.safe_dump({"all": {"hosts": {"localhost": {
            "ansible_connection": "local",
            "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}, handle)
    for index, case in enumerate(cases):
        case["index"] = index
    stub = start_stub(root)
    started = time.monotonic()
    outcomes = []
    try:
        batches = plan_batches(cases, workers)

        def one(item):
            name, batch = item
            # a safety net only: each task has its own timeout, which is what counts a hang
            budget = min(sum(case["timeout"] for case in batch) + 120, 1800)
            if batch[0]["kind"] == "playbook":
                return batch, run_playbook_case(name, batch[0], root, budget)
            return batch, run_batch(name, batch, root, budget)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            for batch, ran in pool.map(one, batches):
                for case in batch:
                    verdict, detail, message = judge(case, ran["records"], ran)
                    outcomes.append(dict(case=case, verdict=verdict, detail=detail, message=message,
                                         batch=ran["name"], log=ran["log"]))
                log("%s: %d cases, %.1f s, rc=%s%s" % (ran["name"], len(batch), ran["seconds"], ran["rc"],
                                                       " TIMED OUT" if ran["timed_out"] else ""))
    finally:
        stub.kill()
        stub.wait()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    order = dict((case["id"], case["index"]) for case in cases)
    outcomes.sort(key=lambda o: order[o["case"]["id"]])
    return dict(outcomes=outcomes, seconds=time.monotonic() - started, root=root)


def summarize(outcomes):
    counted = [o for o in outcomes if not o["case"].get("xfail")]
    count = dict((v, sum(1 for o in counted if o["verdict"] == v)) for v in ("exception", "hang", "nameless", "harness"))
    xfailed = [o for o in outcomes if o["case"].get("xfail")]
    line = "%d cases, %d unhandled exceptions, %d hangs, %d messages without the option name" % (
        len(outcomes), count["exception"], count["hang"], count["nameless"])
    if count["harness"]:
        line += ", %d harness errors" % count["harness"]
    still = sum(1 for o in xfailed if o["verdict"] != "ok")
    if xfailed:
        line += " (%d xfail cases not counted: %d still failing, %d now pass)" % (len(xfailed), still, len(xfailed) - still)
    return line, count


def per_plugin(cases):
    counts = {}
    for case in cases:
        key = "%s %s" % (case["kind"], case["plugin"])
        counts[key] = counts.get(key, 0) + 1
    return counts


def report(outcomes, verbose=False):
    lines = []
    for outcome in outcomes:
        if outcome["verdict"] == "ok" and not verbose:
            continue
        case = outcome["case"]
        mark = "XFAIL " if case.get("xfail") else ""
        lines.append("%s%-9s %s [%s] %s | %s" % (mark, outcome["verdict"].upper(), case["id"], case["kind"],
                                                 outcome["detail"], outcome["message"][:300].replace("\n", " ")))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", action="append", default=[], help="only cases whose id contains this (repeatable)")
    parser.add_argument("-v", action="store_true", help="list passing cases too")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (playbooks, logs, records)")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--json", help="write the outcomes here")
    options = parser.parse_args(argv)
    cases = load_cases()
    if options.k:
        cases = [c for c in cases if any(k in c["id"] for k in options.k)]
    ran = run_sweep(cases, workers=options.workers, keep=options.keep)
    print(report(ran["outcomes"], options.v))
    for key, value in sorted(per_plugin(cases).items()):
        print("  %-28s %d" % (key, value))
    line, count = summarize(ran["outcomes"])
    print("%s in %.0f s%s" % (line, ran["seconds"], (" (kept %s)" % ran["root"]) if options.keep else ""))
    if options.json:
        with open(options.json, "w") as handle:
            json.dump([dict(id=o["case"]["id"], verdict=o["verdict"], detail=o["detail"], message=o["message"],
                            xfail=o["case"].get("xfail")) for o in ran["outcomes"]], handle, indent=1)
    return 1 if any(count.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
