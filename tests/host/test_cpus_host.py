# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet_cpus on this host's real /sys and cgroups (moved out of tests/unit: it depends on the host)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._cpus import collect_cpus


def test_collect_cpus_this_host():
    facts = collect_cpus()
    assert facts["usable"] == min(len(os.sched_getaffinity(0)), facts["online"])
