# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/replay_default.py: sgl-kernel's default build (7 archs, --threads=32, every source twice) modelled."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
import replay  # noqa: E402 pylint: disable=wrong-import-position
import replay_default  # noqa: E402 pylint: disable=wrong-import-position

GIB = replay.GIB


@pytest.mark.parametrize("threads, seconds, peak_gib", [
    (1, 1 + 4 + 3 + 2, 4), (2, 1 + 5, 7), (3, 1 + 4, 9), (7, 1 + 4, 9),   # LPT lanes; the t largest peaks side by side
])
def test_a_multi_arch_compile_at_t_threads(threads, seconds, peak_gib):
    job = replay_default.MultiJob("a.cu", 0, 1, [(4, 4 * GIB), (3, 3 * GIB), (2, 2 * GIB)])
    at = job.at(threads)
    assert (at.seconds, at.peak / GIB) == (seconds, peak_gib)
    assert abs(at.cpu * at.seconds - 10) < 1e-9      # the CPU work does not change with threads


def test_the_per_arch_table_is_used_where_it_has_the_pair(tmp_path):
    sm120 = [replay.Job("a.cu", 100, 2 * GIB, 0)]
    table = tmp_path / "per_arch.json"
    table.write_text(json.dumps({"objects": [{"source": "a.cu", "arch": "sm_90a", "seconds": 40, "peak_gib": 6},
                                             {"source": "a.cu@sm_80", "arch": "sm_80", "seconds": 8, "peak_gib": 1}]}))
    multi, measured = replay_default.default_build(sm120, replay_default.load_per_arch(str(table)), 0.25)
    assert measured == 2 and len(multi) == 2 and [m.name for m in multi] == ["a.cu@sm90", "a.cu@sm100"]
    arches = dict(zip(replay_default.ARCHS, multi[0].arches))
    # measured: a whole one-arch compile, its host share (0.25) off; the rest: SM120, host 25 s off
    assert arches["sm_90a"] == (30.0, 6 * GIB) and arches["sm_80"] == (6.0, 1 * GIB) and arches["sm_120a"] == (75.0, 2 * GIB)
    assert replay_default.load_per_arch(str(tmp_path / "none.json")) == {}
    table.write_text(json.dumps({"objects": [{"source": "a.cu"}]}))
    with pytest.raises(replay.ReplayError, match="source, arch, seconds and peak_gib"):
        replay_default.load_per_arch(str(table))


def test_the_default_build_ooms_and_the_scheduler_with_threads_does_not():
    """On the big node (112 cores / 449 GiB): ninja's default -j OOMs; the scheduler with nvcc threads per source has
    no OOM kill and beats --threads 1 (whose longest compile alone takes 5.5x its SM120 time)."""
    multi, _measured = replay_default.default_build(replay.load_record(replay.DEFAULT_RECORD), {})
    rows = dict(replay_default.rows_for(multi, 112, 449))
    assert rows["ninja default -j114, --threads=32"]["oom_kills"] > 0
    threads, one = rows["scheduler, nvcc threads per source, warm"], rows["scheduler, --threads 1, warm"]
    assert threads["oom_kills"] == 0 and not threads["failed"] and threads["makespan"] < 0.6 * one["makespan"]
