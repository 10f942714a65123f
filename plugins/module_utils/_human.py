# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Byte sizes as people read them (``448Gi``, like ``free -h``), built on ansible-core's helpers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.text.formatters import human_to_bytes

_UNITS = ("B", "Ki", "Mi", "Gi", "Ti", "Pi")


def human(num_bytes):
    """``free -h`` style: 1024-based, at most three significant digits, ``None`` stays ``None``."""
    if num_bytes is None:
        return None
    value = float(num_bytes)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            break
        value /= 1024.0
    if unit == "B":
        return "%dB" % value
    return ("%.1f%s" % (value, unit)) if abs(value) < 10 else ("%d%s" % (round(value), unit))


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
