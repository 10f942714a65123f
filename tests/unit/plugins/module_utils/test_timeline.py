# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_timeline: the guarded build's memory over time stays bounded, keeps every peak and each attempt's start."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._timeline import (
    Timeline,
    current_step,
    downsample,
    merge,
)

MIB = 1024 ** 2


@pytest.mark.parametrize("samples, expected", [
    ([], []),
    ([[0, 1, 2, 1]], [[0, 1, 2, 1]]),
    ([[0, 1, 2, 1], [2, 5, 2, 1]], [[0, 5, 2, 1]]),
    ([[0, 1, 2, 1], [2, 5, 2, 1], [4, 3, 2, 1]], [[0, 5, 2, 1], [4, 3, 2, 1]]),
    # a pair across attempts stays apart: the backoff's moment is kept
    ([[0, 9, 4, 1], [2, 1, 2, 2], [4, 3, 2, 2]], [[0, 9, 4, 1], [2, 3, 2, 2]]),
])
def test_downsample(samples, expected):
    assert downsample(samples) == expected


def test_merge_keeps_the_earlier_time_and_the_larger_memory():
    assert merge([10.0, 7, 2, 1], [12.0, 3, 2, 1]) == [10.0, 7, 2, 1]


@pytest.mark.parametrize("count", [10, 240, 241, 1000, 10800])
def test_bounded_for_a_long_build_and_peak_kept(count):
    timeline = Timeline(capacity=240)
    for index in range(count):
        memory = 999 * MIB if index == count // 3 else (index % 50) * MIB
        timeline.add(index * 2.0, memory, 4, 1)
    samples = timeline.to_list()
    assert len(samples) <= 241
    assert samples[0][0] == 0.0
    assert timeline.peak() == 999 * MIB
    assert [s[0] for s in samples] == sorted(s[0] for s in samples)
    if count >= 1000:
        assert len(samples) >= 120, "the resolution halves, it does not collapse"
        assert len(json.dumps(samples)) < 12000


def test_every_attempt_keeps_its_start():
    timeline = Timeline(capacity=16)
    for index in range(300):
        attempt = 1 if index < 100 else (2 if index < 200 else 3)
        timeline.add(index, 10 * MIB, 8 // attempt, attempt)
    starts = {}
    for sample in timeline.to_list():
        starts.setdefault(sample[3], sample[0])
    assert sorted(starts) == [1, 2, 3]
    assert starts[2] == 100.0 and starts[3] == 200.0
    assert len(timeline.to_list()) <= 17


def test_capacity_is_checked():
    with pytest.raises(ValueError, match="capacity"):
        Timeline(capacity=2)


@pytest.mark.parametrize("text, expected", [
    ("", None),
    ("-- Configuring done\n", None),
    ("[1/12] Compiling unit_1.cu\n[2/12] Compiling unit_2.cu\n", "Compiling unit_2.cu"),
    ("[40/41] Building CUDA object x.o\n[41/41] Linking CXX shared module common_ops.so\n",
     "Linking CXX shared module common_ops.so"),
])
def test_current_step(text, expected):
    assert current_step(text) == expected


# ---------------------------------------------------------------- issue 20 item 4: each interval's maximum

def test_a_sample_is_the_intervals_maximum_not_a_reading():
    """build.html drew 376 MiB under a 400 MiB budget while its table said peak 400 MiB: the readings at each
    status write missed the peak between them. Readings observed in between and the cgroup's peak counter count."""
    timeline = Timeline()
    timeline.add(0.0, 10 * MIB, 4, 1, peak=10 * MIB)
    timeline.observe(395 * MIB)             # the watchdog's 50 ms reading saw it
    timeline.add(2.0, 376 * MIB, 4, 1, peak=380 * MIB)
    timeline.add(4.0, 200 * MIB, 4, 1, peak=400 * MIB)   # the counter rose: 400 MiB was reached in this interval
    timeline.add(6.0, 150 * MIB, 4, 1, peak=400 * MIB)   # it did not: the reading is the interval's best
    assert [s[1] for s in timeline.to_list()] == [10 * MIB, 395 * MIB, 400 * MIB, 150 * MIB]
    assert timeline.peak() == 400 * MIB


def test_each_attempt_has_its_own_peak_counter():
    timeline = Timeline()
    timeline.add(0.0, 100 * MIB, 4, 1, peak=400 * MIB)
    timeline.add(6.0, 5 * MIB, 2, 2, peak=5 * MIB)       # a new cgroup: its counter starts again
    timeline.add(8.0, 200 * MIB, 2, 2, peak=245 * MIB)
    assert [s[1] for s in timeline.to_list()] == [400 * MIB, 5 * MIB, 245 * MIB]


def test_close_attempt_adds_a_peak_reached_after_the_last_sample():
    timeline = Timeline()
    timeline.add(0.0, 10 * MIB, 4, 1)
    timeline.add(2.0, 300 * MIB, 4, 1)
    timeline.close_attempt(3.1, 4, 1, 400 * MIB)         # the OOM kill came between two samples
    assert timeline.to_list()[-1] == [3.1, 400 * MIB, 4, 1] and timeline.peak() == 400 * MIB
    timeline.close_attempt(3.2, 4, 1, 400 * MIB)         # already held: nothing added
    timeline.close_attempt(3.3, 4, 1, None)
    assert len(timeline.to_list()) == 3
    timeline.add(4.0, 5 * MIB, 2, 2)
    assert [s[3] for s in timeline.to_list()] == [1, 1, 1, 2]
