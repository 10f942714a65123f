# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's merge of the nodes' peaks.json files (issue 29 item 2: cold is safe across the fleet)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.preflight.plugins.filter.merge_admission_peaks import merge_admission_peaks
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._admission_policy import merge_fleet_peaks

MIB = 1024 ** 2


def peak(mib, killed=False, seconds=3.0):
    return {"peak_bytes": mib * MIB, "seconds": seconds, "killed": killed}


def test_largest_finished_peak_wins_whatever_the_order():
    a = {"t/src/x.cu": peak(300), "t/src/y.cu": peak(50)}
    b = {"t/src/x.cu": peak(420), "t/src/z.cu": peak(80)}
    for order in ((a, b), (b, a)):
        merged = merge_fleet_peaks(*order)
        assert merged == {"t/src/x.cu": peak(420), "t/src/y.cu": peak(50), "t/src/z.cu": peak(80)}


def test_a_killed_compile_counts_only_where_no_node_finished_it():
    finished, killed = {"k": peak(300)}, {"k": peak(900, killed=True)}
    assert merge_fleet_peaks(killed, finished) == finished == merge_fleet_peaks(finished, killed)
    assert merge_fleet_peaks(killed, {"k": peak(500, killed=True)}) == killed


@pytest.mark.parametrize("bad", [-5, 0, float("nan"), "4GiB", [1], None, {"peak_bytes": -MIB}, {"peak_bytes": "1"},
                                 {"peak_bytes": 10 ** 400}, {"peak_bytes": MIB, "seconds": "3"}])
def test_entries_the_launcher_would_not_trust_are_dropped(bad):
    assert merge_fleet_peaks({"k": bad, "ok": peak(10)}, {"k": bad}) == {"ok": peak(10)}


def test_filter_reads_file_text_and_drops_what_is_not_a_table():
    texts = [json.dumps({"a": peak(100)}), "not json", "[1, 2]", {"a": peak(200)}, "x" * (64 * MIB + 1), 7]
    assert merge_admission_peaks(texts) == {"a": peak(200)}
    assert merge_admission_peaks([]) == {}


@pytest.mark.parametrize("wrong", ["{}", {"a": 1}, 5])
def test_filter_refuses_what_is_not_a_list(wrong):
    with pytest.raises(AnsibleFilterError) as refused:
        merge_admission_peaks(wrong)
    assert "expects a list of peaks tables" in str(refused.value)
