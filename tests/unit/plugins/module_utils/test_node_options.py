# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_node_options: the node profile's rows, cut from the option table at a seam, are in the table in their place."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _node_options
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options as table


def test_the_node_rows_are_in_the_table_once_and_in_order():
    names = [entry["name"] for entry in table.OPTIONS]
    node = [entry["name"] for entry in _node_options.NODE_OPTIONS]
    start = names.index(node[0])
    assert names[start:start + len(node)] == node
    assert len(set(names)) == len(names)
    assert names[start - 1] == "oom_ignore_cgroups" and names[start + len(node)] == "dcgm_result_max_age"


def test_the_ib_counter_options_are_bounded_and_off_by_default():
    rows = dict((entry["name"], entry) for entry in _node_options.NODE_OPTIONS)
    assert rows["check_ib_counters"]["default"] is False
    assert rows["max_ib_link_downed"]["check"] == dict(min=0, max=2 ** 31 - 1)
    assert all(entry["roles"] == table.CHECK for entry in _node_options.NODE_OPTIONS)
