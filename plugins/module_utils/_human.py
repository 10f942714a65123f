# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Byte sizes as people read them (``448Gi``, like ``free -h``), built on ansible-core's helpers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.common.text.formatters import human_to_bytes
from ansible.module_utils.six import integer_types, string_types
from ansible_collections.gpufleet.preflight.plugins.module_utils._values import non_finite

_UNITS = ("B", "Ki", "Mi", "Gi", "Ti", "Pi")
# ``64GB``: human_to_bytes reads it as 64 GiB, a person may mean 64 x 10^9. Refused, not guessed.
_DECIMAL_UNIT = re.compile(r"^\s*([0-9.]+)\s*([kKmMgGtTpPeE])[bB]\s*$")
# One written form of a size: a number and a binary unit, nothing around them (``5 GiB``, ``1e99GiB`` are typos).
_SIZE_FORM = re.compile(r"[0-9]+(\.[0-9]+)?([KMGTPE](iB)?|B)?\Z", re.I)


def human(num_bytes):
    """``free -h`` exactly (procps-ng 4 ``scale_size``): 1024-based, ``None`` stays ``None``.

    Up to 999 bytes as ``NB``; then the first unit where one decimal fits three characters
    (``9.9Gi``) or the whole number, truncated as free does, fits three digits (``449Gi``, never
    ``1000Ki``). So 449.7 GiB prints ``449Gi`` and 9.96 GiB prints ``9Gi``, exactly like free.
    """
    if num_bytes is None:
        return None
    if len("%d" % num_bytes) <= 3:
        return "%dB" % num_bytes
    value = float(num_bytes)
    for unit in _UNITS[1:]:
        value /= 1024.0
        one_decimal = "%.1f" % value
        if len(one_decimal) <= 3:
            return one_decimal + unit
        whole = "%d" % int(value)
        if len(whole) <= 3:
            return whole + unit
    return "%d%s" % (int(value), _UNITS[-1])


def with_human(prefix, num_bytes):
    """``{prefix_bytes: n, prefix_human: '1.5Gi'}`` so every size a person reads has both forms."""
    return {prefix + "_bytes": num_bytes, prefix + "_human": human(num_bytes)}


def parse_size(text):
    """``64GiB``, ``64G``, ``512MiB``, ``1048576`` -> bytes; ValueError with the reason otherwise.

    Accepts IEC (``GiB``) and the short forms ansible-core reads as binary (``G``).
    """
    if isinstance(text, bool):
        raise ValueError("%r is not a size" % (text,))
    if isinstance(text, int):
        if text < 0:
            raise ValueError("%r is negative" % (text,))
        return text
    cleaned = str(text).strip().replace("iB", "B").replace("ib", "b")
    try:
        value = human_to_bytes(cleaned)
    except (ValueError, TypeError) as exc:
        raise ValueError("%r is not a size like 64GiB, 512MiB or a number of bytes (%s)" % (text, exc))
    if value < 0:
        raise ValueError("%r is negative" % (text,))
    return value


def parse_size_option(option, value):
    """A size option -> bytes, or ValueError naming ``option``: the one rule for every size a user writes.

    Binary units (``64GiB``, ``64G``) or a whole number of bytes. ``64GB`` (10^9 or 2^30?), ``5 GiB`` and
    non-finite or fractional numbers are refused rather than guessed.
    """
    if isinstance(value, float) and not non_finite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, string_types):
        decimal = _DECIMAL_UNIT.match(value)
        if decimal:
            raise ValueError("%s: %r is ambiguous (decimal GB = 10^9 bytes, or GiB = 2^30?): write %s%siB for powers "
                             "of 1024, or the number of bytes" % (option, value, decimal.group(1),
                                                                  decimal.group(2).upper()))
        if not _SIZE_FORM.match(value.strip()):
            raise ValueError("%s: %r is not a size like 64GiB, 512MiB or a number of bytes" % (option, value))
    elif value is None or isinstance(value, bool) or not isinstance(value, integer_types):
        raise ValueError("%s: %r is not a size like 64GiB, 512MiB or a number of bytes" % (option, value))
    try:
        return parse_size(value)
    except ValueError as exc:
        raise ValueError("%s: %s" % (option, exc))
