# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pytest plugin (``-p checkout_clean``): a test that writes the collection's reports into the checkout fails, and
a run that leaves any file in the checkout that git would see (new or changed since the run started) fails at its end.

The playbooks write their reports to ``reports/`` of the directory ansible-playbook started in (``preflight_report_dir``,
``sgl_kernel_report_dir``); a test that runs one from the repository root with the default left
``reports/build.{json,md,html}`` in the checkout after ``make test``, and a later test could read them as its own.
Each test gives its playbooks a report directory of its own (or an empty one); this names the test that did not.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WATCHED = ("reports",)


def snapshot(root=REPO, watched=WATCHED):
    """``{path: mtime_ns}`` of every file under the watched folders of the checkout (nothing when there are none)."""
    found = {}
    for folder in watched:
        for directory, _dirs, files in os.walk(os.path.join(root, folder)):
            for name in files:
                path = os.path.join(directory, name)
                try:
                    found[os.path.relpath(path, root)] = os.lstat(path).st_mtime_ns
                except OSError:
                    pass
    return found


def written(before, after):
    """The files a test made or rewrote."""
    return sorted(path for path, stamp in after.items() if before.get(path) != stamp)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    item.gpufleet_checkout = snapshot()   # before the fixtures: a module fixture's playbook counts for its first test
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "teardown" or not hasattr(item, "gpufleet_checkout"):
        return
    changed = written(item.gpufleet_checkout, snapshot())
    if changed and report.outcome != "failed":
        report.outcome = "failed"
        report.longrepr = ("this test wrote into the checkout: %s. Give the playbook its own report directory "
                           "(preflight_report_dir / sgl_kernel_report_dir under tmp_path) or cwd" % ", ".join(changed))


def git_changes(root=REPO):
    """``{path: status}`` of what ``git status`` shows in the checkout (untracked files one by one; ignored ones
    not), or None outside a git checkout (an unpacked tarball)."""
    try:
        out = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=all"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return dict((line[3:], line[:2]) for line in out.splitlines() if line)


def pytest_sessionstart(session):
    session.config.gpufleet_git = git_changes()


def pytest_sessionfinish(session, exitstatus):
    """A test that writes beside the files it reads (a stub's call log in a fixture folder) leaves them for the next
    stage to replay: CI's fleet nodes once copied a unit run's records from tests/unit/.../fixtures/gpus."""
    before = getattr(session.config, "gpufleet_git", None)
    after = git_changes() if before is not None else None
    if after is None:
        return
    left = sorted(path for path, status in after.items() if before.get(path) != status)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = ("this run left files in the checkout that git sees: %s. A test must write under tmp_path (copy a "
                   "fixture folder before pointing a stub at it)" % ", ".join(left[:20]))
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line("checkout_clean: " + message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED if exitstatus == 0 else exitstatus
