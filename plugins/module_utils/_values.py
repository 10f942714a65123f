# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of option values that an argument_spec type cannot express (finite, bounded, absolute).

The ONE place NaN and infinity are recognised (:func:`non_finite`, :func:`first_non_finite`): the readiness
policy, the readiness action, guarded_build and its option checks all ask here.

``type=float`` accepts ``nan``, ``inf`` and ``1e99``: a timeout of ``nan`` never fires and one of ``inf``
never ends. Every node-side option holding seconds goes through :func:`seconds`, every path that must
not depend on the node's working directory through :func:`absolute_paths`; each raises ValueError
naming the option, which the module turns into ``fail_json``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os
import re

# A program given by name (found on PATH): no slash, no space, no brackets.
_PROGRAM_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")


def non_finite(value):
    """Whether ``value`` is a float NaN or infinity (``nan`` compares false with everything, ``inf`` never ends)."""
    return isinstance(value, float) and (math.isnan(value) or math.isinf(value))


def first_non_finite(params):
    """``(name, value)`` of the first option (sorted by name) given NaN or infinity, or None.

    ansible-core's int conversion raises ``OverflowError`` on infinity instead of failing the option: callers name
    the option from this before (or after) the argument spec runs.
    """
    for name in sorted(params):
        if non_finite(params[name]):
            return name, params[name]
    return None


def seconds(value, option, minimum=0.0, maximum=86400.0 * 7, zero=True):
    """``value`` as float seconds, finite and within ``[minimum, maximum]`` (``zero=False``: strictly above 0)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError("%s: %r is not a number of seconds" % (option, value))
    if math.isnan(number) or math.isinf(number):
        raise ValueError("%s: %s is not a finite number of seconds" % (option, value))
    if number < minimum or (not zero and number <= 0):
        wanted = "greater than 0" if not zero and minimum <= 0 else "%s or more" % (int(minimum) if minimum == int(minimum) else minimum)
        raise ValueError("%s: must be %s seconds, got %s" % (option, wanted, value))
    if number > maximum:
        raise ValueError("%s: %s seconds is more than the %d allowed" % (option, value, int(maximum)))
    return number


def absolute_paths(paths, option):
    """Every path absolute (``~`` expanded), or ValueError naming the option and the relative one."""
    checked = []
    for path in paths:
        if isinstance(path, str) and "\x00" in path:
            raise ValueError("%s: %r holds a NUL byte, which no path can" % (option, path))
        expanded = os.path.expanduser(path) if isinstance(path, str) else path
        if not isinstance(expanded, str) or not expanded or not os.path.isabs(expanded):
            raise ValueError("%s: %r is not an absolute path; a relative one would be measured from wherever the "
                             "module happens to run" % (option, path))
        checked.append(path)
    return checked


def program(value, option):
    """An interpreter or tool: None, an absolute path or a bare program name on PATH; ValueError otherwise."""
    if value is None:
        return None
    text = value if isinstance(value, str) else None
    if text is not None and "\x00" not in text:
        expanded = os.path.expanduser(text)
        if os.path.isabs(expanded) or _PROGRAM_NAME.match(text):
            return text
    raise ValueError("%s: %r is neither an absolute path nor a program name to look up on PATH" % (option, value))


def relaxed_spec(argument_spec):
    """``argument_spec`` with its int and float options as ``raw``.

    ansible-core's int check lets ``OverflowError`` through for ``inf`` (``int(float('inf'))``): a module whose
    spec raised it builds itself again from this spec, and its own :func:`seconds` checks name the option.
    """
    relaxed = {}
    for name, spec in argument_spec.items():
        spec = dict(spec)
        if spec.get("type") in ("int", "float"):
            spec["type"] = "raw"
        relaxed[name] = spec
    return relaxed
