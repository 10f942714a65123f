# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pytest plugin (``-p ci_no_skip``): with CI=true a skipped test is reported as failed.

CI installs every tool the suites need, so a skip there means something the tests rely on is
missing and the suite would pass without testing it. Skips that depend on the ansible-core
version rather than on the machine are allowed by their reason.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

ALLOWED_ON_CI = (
    "ansible.builtin.paramiko_ssh is not in this ansible-core",
)


def _skip_reason(report):
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # pylint: disable=unused-argument
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") != "true" or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if any(allowed in reason for allowed in ALLOWED_ON_CI):
        return
    report.outcome = "failed"
    report.longrepr = "skipped on CI, where nothing may be skipped: %s" % reason
