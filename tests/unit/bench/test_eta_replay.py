# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/eta_replay.py: a .ninja_log split into its ninja runs, known times read from a census or a record, and the
replay of the kept cold run through the product's ETA rule."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO, "bench"))
import eta_replay  # noqa: E402 pylint: disable=wrong-import-position


def test_a_log_of_several_ninja_runs_is_split_where_the_end_times_go_back():
    text = "# ninja log v5\n0\t5\t1\tbuild.ninja\th\n" + "0\t100\t1\ta.o\th\n50\t90\t1\tb.o\th\n10\t200\t1\tc.o\th\nbad line\n"
    assert eta_replay.ninja_runs(text) == [[(0, 5, "build.ninja"), (0, 100, "a.o")], [(50, 90, "b.o"), (10, 200, "c.o")]]
    assert eta_replay.ninja_runs("") == []


@pytest.mark.parametrize("document, expected", [
    ({"sources": {"a.cu": {"seconds": 3}, "b.cu": {"peak_bytes": 1}, "c.cu": 5}}, {"a.cu": 3.0}),
    ({"objects": [{"source": "a.cu", "seconds": 4}, {"source": "b.cu", "seconds": 0}]}, {"a.cu": 4.0}),
])
def test_known_times_of_a_census_or_a_record(document, expected):
    assert eta_replay.known_times(document) == expected


def test_anything_else_is_refused_by_name():
    with pytest.raises(ValueError, match="neither a census"):
        eta_replay.known_times({"format": "x"})


def test_the_kept_cold_run_replays_with_the_shipped_census_within_30_percent_at_5_minutes():
    """The run the census was timed on: its own times at its pace (circular, see docs/benchmarks.md "Run F")."""
    with open(eta_replay.LOG) as handle:
        steps = max(eta_replay.ninja_runs(handle.read()), key=len)
    with open(eta_replay.TIMES[1]) as handle:
        seconds = eta_replay.known_times(json.load(handle))
    rows = eta_replay.replay_eta(steps, seconds, 2, [eta_replay.timeline.LEARNED_TAU])
    now, shown, _raw, truth = eta_replay.at(rows[eta_replay.timeline.LEARNED_TAU], 300)
    assert now == 300 and abs(shown - truth) < 0.3 * truth, (shown, truth)
