# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One fleet gate over AWX job slices (issue 38): the slices' entries merged, decided once."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _slices


def entry(ready, not_ready):
    return dict(ready=list(ready), not_ready=list(not_ready), total=len(ready) + len(not_ready))


TWO = {"gpufleet_preflight_slice_101": entry(["a", "b", "c"], ["d"]),
       "gpufleet_preflight_slice_102": entry(["e", "f", "g"], ["h"]),
       "gpufleet_preflight": {"gate": {"decision": "continue"}},   # the last slice's own key: ignored
       "unrelated": 1}

# variables, max_not_ready, expected slices, decision, not ready, words in the reason
CASES = [
    (TWO, None, None, "continue", ["d", "h"], "no limit"),
    (TWO, 2, None, "continue", ["d", "h"], "2 of 8 hosts"),
    (TWO, 1, None, "stop", ["d", "h"], "2 of 8 hosts are not ready"),       # each slice alone passed with 1
    (TWO, "25%", None, "continue", ["d", "h"], "within"),
    (TWO, "20%", None, "stop", ["d", "h"], "more than"),
    (TWO, None, 3, "stop", ["d", "h"], "2 of 3 slices"),                     # a slice failed before publishing
    (TWO, None, 2, "continue", ["d", "h"], "no limit"),
    ({}, None, None, "stop", [], "no slice published"),
    (dict(TWO, gpufleet_preflight_slice_103="junk"), None, None, "stop", ["d", "h"], "malformed"),
    ({"gpufleet_preflight_slice_1": entry(["a"], []), "gpufleet_preflight_slice_2": entry([], ["a"])}, None, None,
     "stop", ["a"], "none of the 1 host"),                                    # in two slices: not ready wins
    ({"gpufleet_preflight_slice_1": entry([], ["a", "b"])}, None, None, "stop", ["a", "b"], "none of the 2"),
]


@pytest.mark.parametrize("variables, limit, expected, decision, not_ready, words", CASES)
def test_merge(variables, limit, expected, decision, not_ready, words):
    merged = _slices.merge(variables, limit, expected_slices=expected)
    assert merged["gate"]["decision"] == decision and merged["gate"]["abort"] is (decision == "stop")
    assert merged["not_ready"] == not_ready
    assert words in merged["gate"]["reason"], merged["gate"]["reason"]


def test_slice_ids_and_totals():
    merged = _slices.merge(TWO)
    assert merged["slices"] == ["101", "102"] and merged["total"] == 8 and merged["ready"] == list("abcefg")


def test_a_bad_limit_names_the_option():
    with pytest.raises(ValueError, match="preflight_max_not_ready"):
        _slices.merge(TWO, "many")
