# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvcc threads per source (plugins/module_utils/_build/_admission_threads.py): -gencode counts, the CPUs a compile
uses, argv with another --threads, and the peak model per thread count."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_threads as threads_rule

GIB = 1024 ** 3
MIB = 1024 ** 2


@pytest.mark.parametrize("argv, threads", [
    (["--threads", "4", "-c", "a.cu"], 4), (["--threads=2"], 2), (["-t", "8"], 8), (["-t=3"], 3),
    (["--threads", "0"], 16), (["-c", "a.c"], 1), (["--threads", "x"], 1), (["--threads"], 1),
])
def test_threads_of(argv, threads):
    assert threads_rule.threads_of(argv, 16) == threads


@pytest.mark.parametrize("options, spare_bytes, spare_cpus, threads", [
    ([1, 2, 3, 4], 10, 10, 4), ([1, 2, 3, 4], 1, 10, 2), ([1, 2, 3, 4], 10, 0, 1), ([1, 2, 3, 4], -5, 3, 1), ([7], 99, 99, 1),
])
def test_threads_for(options, spare_bytes, spare_cpus, threads):
    assert threads_rule.threads_for(options, spare_bytes, spare_cpus) == threads


@pytest.mark.parametrize("argv, count, nvcc", [
    (["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-gencode", "arch=compute_100a,code=sm_100a", "-c", "a.cu"], 2, True),
    (["/usr/bin/ccache", "/usr/local/cuda/bin/nvcc", "--generate-code=arch=compute_80,code=sm_80", "-c", "a.cu"], 1, True),
    (["g++", "-c", "a.cc"], 0, False),
    (["nvcc", "-arch=sm_90", "-c", "a.cu"], 0, True),
])
def test_arch_count_and_is_nvcc(argv, count, nvcc):
    assert (threads_rule.arch_count(argv), threads_rule.is_nvcc(argv)) == (count, nvcc)


@pytest.mark.parametrize("argv, threads, expected", [
    (["nvcc", "--threads", "32", "-c", "a.cu"], 3, ["nvcc", "-c", "a.cu", "--threads=3"]),
    (["nvcc", "--threads=32", "-t", "4", "-c", "a.cu"], 2, ["nvcc", "-c", "a.cu", "--threads=2"]),
    (["nvcc", "-t=8", "-c", "a.cu"], 1, ["nvcc", "-c", "a.cu", "--threads=1"]),
    (["ccache", "nvcc", "-c", "a.cu"], 4, ["ccache", "nvcc", "-c", "a.cu", "--threads=4"]),
    (["nvcc", "-c", "a.cu", "--threads"], 2, ["nvcc", "-c", "a.cu", "--threads=2"]),
])
def test_with_threads(argv, threads, expected):
    assert threads_rule.with_threads(argv, threads) == expected
    assert threads_rule.threads_of(expected, 64) == threads


@pytest.mark.parametrize("points, threads, archs, expected_mib", [
    ({}, 3, 7, 300),                                  # only peak_bytes (100 at 1 thread): 100 x 3 / 1
    ({"2": 200}, 1, 7, 200),                          # one point: fewer threads never below it ...
    ({"2": 200}, 4, 7, 400),                          # ... more: scaled from it (base taken as 0)
    ({"1": 190, "2": 208, "3": 284}, 2, 3, 208),      # measured: as measured
    ({"1": 100, "3": 300}, 2, 7, 200),                # two points: the line base + t x per
    ({"1": 100, "3": 300}, 5, 7, 500),
    ({"1": 100, "3": 300}, 9, 7, 700),                # more threads than archs: the archs
    ({"1": 300, "2": 200}, 4, 7, 400),                # the 1-thread point (host front end) only floors: 4 x 100
    ({"1": 190, "2": 206, "3": 300}, 5, 7, 488),      # nvcc 13.0, 3 archs, measured here: 18 + 5 x 94
    ({"1": 190, "2": 206, "3": 300}, 1, 7, 190),
    # the real tree, per_tensor_quant_fp8.cu, seven archs at --threads 1 / 2 / 4 (2.61, 5.19, 10.35 GiB): 18.1 GiB at 7
    ({"1": 2673, "2": 5315, "4": 10598}, 7, 7, 18522.5),
])
def test_peak_at(points, threads, archs, expected_mib):
    entry = {"peak_bytes": 100 * MIB, "by_threads": dict((t, p * MIB) for t, p in points.items())}
    assert abs(threads_rule.peak_at(entry, threads, archs) - expected_mib * MIB) <= 1


@pytest.mark.parametrize("argv, threads", [
    (["nvcc", "--threads=\u00b2", "-gencode=a", "-gencode=b", "-c", "x.cu"], 1),   # "²".isdigit() is True, int() refuses it
    (["nvcc", "-t", "\u0661", "-c", "x.cu"], 1),                                  # an Arabic-Indic one
    (["nvcc", "--threads", "2", "-gencode=a", "-gencode=b", "-gencode=c", "-c", "x.cu"], 2),
])
def test_threads_written_in_other_digits_are_not_threads(argv, threads):
    """Issue 36 finding 4: a thread count that is not ASCII digits is no thread count, never a traceback."""
    assert threads_rule.threads_of(argv, cpus=8) == threads


def test_thread_points_drop_keys_that_are_not_ascii_digits_and_floor_small_points():
    """Issue 36 findings 2 and 4: a "²" key is dropped (it crashed every node's --check), and a 10 MiB 1-thread point
    beside a 700 MiB 4-thread one is read as 175 MiB: with a base >= 0 the peak grows at most in proportion."""
    entry = {"peak_bytes": 700 * MIB, "by_threads": {"\u00b2": 5, "1": 10 * MIB, "4": 700 * MIB}}
    assert threads_rule.thread_points(entry) == {1: 175 * MIB, 4: 700 * MIB}
    assert threads_rule.peak_at(entry, 1, 7) == 175 * MIB
