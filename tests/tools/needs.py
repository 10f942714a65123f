# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the suites that run real things (fleets, VMs, Slurm) share in their conftest.py: the prerequisite gate
(a skip, a failure under CI=true, where tests/tools/ci_no_skip.py would fail the skip anyway) and the teardown of
several parts that reports every part that did not stop, after trying them all."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest


def require(what, problems):
    """Skip the test (fail it under CI=true) when ``problems`` lists what this machine lacks for ``what``."""
    if not problems:
        return
    reason = "%s need: %s" % (what, "; ".join(problems))
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " (CI=true: failing instead of skipping)", pytrace=False)
    pytest.skip(reason)


def stop_all(parts, errors=(Exception,)):
    """``part.stop()`` for each part, in order; one test failure naming every one that raised ``errors``."""
    problems = []
    for part in parts:
        try:
            part.stop()
        except errors as exc:
            problems.append(str(exc))
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)
