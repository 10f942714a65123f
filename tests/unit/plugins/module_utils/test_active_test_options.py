# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_active_test_options: the active tests' rows are in the option table after the node rows, off by default."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _active_test_options
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options as table


def test_the_active_test_rows_are_in_the_table_once_and_in_order():
    names = [entry["name"] for entry in table.OPTIONS]
    rows = [entry["name"] for entry in _active_test_options.ACTIVE_TEST_OPTIONS]
    start = names.index(rows[0])
    assert names[start:start + len(rows)] == rows and names[start + len(rows)] == "custom_checks"
    assert len(set(names)) == len(names)


def test_the_dcgm_result_is_not_required_by_default():
    rows = dict((entry["name"], entry) for entry in _active_test_options.ACTIVE_TEST_OPTIONS)
    assert rows["dcgm_result_max_age"]["default"] == 0 and rows["dcgm_result_min_level"]["check"] == dict(min=2, max=4)
    assert all(entry["roles"] == table.CHECK for entry in _active_test_options.ACTIVE_TEST_OPTIONS)
