# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_human: sizes as ``free -h`` prints them, sizes parsed with ansible-core's human_to_bytes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human, parse_size, parse_size_option, with_human

GIB = 1024 ** 3


@pytest.mark.parametrize("num, text", [
    (None, None),
    (0, "0B"),
    (140 * 1024, "140Ki"),
    (441 * 1024 ** 2, "441Mi"),
    (235 * 1024 ** 2, "235Mi"),
    (449 * GIB, "449Gi"),
    (int(1.5 * GIB), "1.5Gi"),
    (2 * 1024 ** 4, "2.0Ti"),
])
def test_human_reads_like_free_h(num, text):
    assert human(num) == text


def test_with_human_pairs_bytes_and_text():
    assert with_human("total", 2 * GIB) == {"total_bytes": 2 * GIB, "total_human": "2.0Gi"}


@pytest.mark.parametrize("text, expected", [
    ("64GiB", 64 * GIB),
    ("64G", 64 * GIB),
    ("512MiB", 512 * 1024 ** 2),
    ("1048576", 1048576),
    (4096, 4096),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["abc", "-5G", "64 furlongs", True, -1])
def test_parse_size_rejects_with_reason(text):
    with pytest.raises(ValueError) as err:
        parse_size(text)
    assert repr(text) in str(err.value) or "negative" in str(err.value)


@pytest.mark.parametrize("value, expected", [
    ("64GiB", 64 * GIB),
    ("64G", 64 * GIB),
    (" 512MiB ", 512 * 1024 ** 2),
    (1048576, 1048576),
    (4096.0, 4096),
])
def test_parse_size_option(value, expected):
    assert parse_size_option("reserve", value) == expected


@pytest.mark.parametrize("value, words", [
    ("64GB", "ambiguous"),
    ("64 gb", "ambiguous"),
    ("5 GiB", "not a size"),
    ("1e99GiB", "not a size"),
    ("", "not a size"),
    (None, "not a size"),
    (True, "not a size"),
    (1.5, "not a size"),
    (float("nan"), "not a size"),
    (-1, "negative"),
])
def test_parse_size_option_names_the_option(value, words):
    with pytest.raises(ValueError) as info:
        parse_size_option("memory_per_thread", value)
    assert str(info.value).startswith("memory_per_thread: ") and words in str(info.value)
