# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bad-input sweep (issue 12, "Done when"): every case of tests/sweep/cases/*.yml through Ansible.

Prints `N cases, E unhandled exceptions, H hangs, M messages without the option name` and fails on any
E, H or M (cases marked xfail in the table are reported but not counted). SWEEP_WORKERS sets the
number of ansible-playbook runs side by side (default 3); SWEEP_K=substring runs a subset.
"""

from __future__ import absolute_import, division, print_function

import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sweeplib  # noqa: E402  (test-local helper next to this file)

PLUGINS = {
    "module": {"node_facts", "build_processes", "guarded_build", "sgl_kernel_tree"},
    "action": {"readiness", "fleet_reports", "build_watch"},
    "filter": {"build_jobs", "fleet_report", "fleet_table", "fleet_markdown", "fleet_junit", "fleet_gate"},
    "role": {"preflight", "build_deps", "sgl_kernel"},
    "playbook": {"preflight", "reap", "prepare_offline_sources"},
}


def _present():
    """Every module, action, filter and role the collection ships, from its files."""
    repo = sweeplib.REPO
    actions = set(n[:-3] for n in os.listdir(os.path.join(repo, "plugins", "action")) if n.endswith(".py"))
    modules = set(n[:-3] for n in os.listdir(os.path.join(repo, "plugins", "modules")) if n.endswith(".py")) - actions
    filters = set()
    for name in os.listdir(os.path.join(repo, "plugins", "filter")):
        if name.endswith(".yml"):
            filters.add(name[:-4])
        elif name.endswith(".py"):
            with open(os.path.join(repo, "plugins", "filter", name)) as handle:
                if "name: %s" % name[:-3] in handle.read():
                    filters.add(name[:-3])
    roles = set(n for n in os.listdir(os.path.join(repo, "roles")) if not n.startswith("."))
    # build_sgl_kernel.yml builds for real; its variables are the sgl_kernel role's, swept as role cases
    playbooks = set(n[:-4] for n in os.listdir(os.path.join(repo, "playbooks")) if n.endswith(".yml")) - {"build_sgl_kernel"}
    return {"module": modules, "action": actions, "filter": filters, "role": roles, "playbook": playbooks}


def test_table_covers_every_plugin_and_role():
    cases = sweeplib.load_cases()
    assert len(cases) >= 300, "the sweep needs at least 300 cases, the table has %d" % len(cases)
    seen = dict((kind, set(c["plugin"] for c in cases if c["kind"] == kind)) for kind in PLUGINS)
    present = _present()
    for kind, plugins in PLUGINS.items():
        plugins = plugins | present[kind]
        assert plugins <= seen[kind], "no %s cases for %s" % (kind, ", ".join(sorted(plugins - seen[kind])))
    for case in cases:
        if case["expect"] == "accept":
            assert case["meaning"], case["id"]


TRACEBACK_CONTROLLER = """Traceback (most recent call last):
  File "/x/ansible_collections/gpufleet/preflight/plugins/filter/build_jobs.py", line 1, in build_jobs
TypeError: boom

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/venv/ansible/_internal/_templating/_jinja_plugins.py", line 1, in wrapper
ansible.errors.AnsibleTemplatePluginError: The filter plugin failed

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/venv/ansible/executor/task_executor.py", line 429, in _execute
ansible.errors.AnsibleTaskError: Task failed
"""

TRACEBACK_HANDLED = """Traceback (most recent call last):
  File "/venv/ansible/module_utils/common/text/formatters.py", line 1, in human_to_bytes
ValueError: bad size

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/x/ansible_collections/gpufleet/preflight/plugins/filter/build_jobs.py", line 1, in build_jobs
ansible.errors.AnsibleFilterError: build_jobs: reserve: bad size

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/venv/ansible/executor/task_executor.py", line 429, in _execute
ansible.errors.AnsibleTaskError: Task failed
"""

MODULE_ESCAPED = """Traceback (most recent call last):
  File "/t/AnsiballZ_x.py", line 1, in <module>
  File "/t/ansible/module_utils/_internal/_ansiballz/_loader.py", line 35, in run_module
  File "/t/ansible_collections/gpufleet/preflight/plugins/modules/x.py", line 1, in main
OverflowError: cannot convert Infinity to integer

The above target exception was the direct cause of the following controller exception:

Traceback (most recent call last):
  File "/venv/ansible/executor/task_executor.py", line 426, in _execute
ansible._internal._errors._captured.AnsibleModuleCapturedError: Module failed
"""

MODULE_FAIL_JSON = """Traceback (most recent call last):
  File "/t/AnsiballZ_x.py", line 1, in <module>
  File "/t/ansible/module_utils/_internal/_ansiballz/_loader.py", line 35, in run_module
  File "/t/ansible/module_utils/basic.py", line 450, in __init__
    self.fail_json(msg=msg)
Message: argument 'jobs' is of type str

The above target exception was the direct cause of the following controller exception:

Traceback (most recent call last):
  File "/venv/ansible/executor/task_executor.py", line 426, in _execute
ansible._internal._errors._captured.AnsibleModuleCapturedError: Module failed
"""


@pytest.mark.parametrize("text, escaped", [
    (TRACEBACK_CONTROLLER, True),
    (TRACEBACK_HANDLED, False),
    (MODULE_ESCAPED, True),
    (MODULE_FAIL_JSON, False),
])
def test_judge_tells_escaped_exceptions_from_handled_ones(text, escaped):
    assert bool(sweeplib.unhandled({"exception": text, "msg": "x"})) is escaped


def test_judge_names_and_hangs():
    case = dict(id="c", kind="module", plugin="p", names=["jobs"], expect="reject", meaning=None, timeout=5)
    batch = dict(timed_out=False)

    def record(status, msg, took=0.1):
        return [dict(task="c", status=status, started=0, ended=took, result={"msg": msg})]

    assert sweeplib.judge(case, record("failed", "jobs: must be a whole number"), batch)[0] == "ok"
    assert sweeplib.judge(case, record("failed", "must be a whole number"), batch)[0] == "nameless"
    assert sweeplib.judge(case, record("ok", ""), batch)[0] == "nameless"
    assert sweeplib.judge(case, record("failed", "jobs: x", took=6), batch)[0] == "hang"
    assert sweeplib.judge(case, [], dict(timed_out=True))[0] == "hang"


@pytest.fixture(scope="module")
def sweep():
    if not shutil.which("ansible-playbook"):
        pytest.skip("ansible-playbook is not on PATH (. tests/env.sh)")
    cases = sweeplib.load_cases()
    if os.environ.get("SWEEP_K"):
        cases = [c for c in cases if os.environ["SWEEP_K"] in c["id"]]
    return sweeplib.run_sweep(cases, workers=int(os.environ.get("SWEEP_WORKERS", "3")), log=lambda line: None)


def test_sweep(sweep):
    outcomes = sweep["outcomes"]
    line, count = sweeplib.summarize(outcomes)
    per_plugin = ", ".join("%s: %d" % item for item in sorted(sweeplib.per_plugin([o["case"] for o in outcomes]).items()))
    print("\n%s\n%s\n%s in %.0f s" % (sweeplib.report(outcomes), per_plugin, line, sweep["seconds"]))
    assert not any(count.values()), "%s:\n%s" % (line, sweeplib.report(outcomes))
