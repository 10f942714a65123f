# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shape of one readiness check, shared by every check function on the controller.

A check function takes ``(facts, policy)`` -- ``facts`` is the dict of gathered subsets keyed
without the ``gpufleet_`` prefix (``facts['memory']``), ``policy`` the validated options -- and
returns ``result(...)``, ``unknown(...)`` or ``None`` (not applicable under this policy).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Characters no report may carry raw: C0 controls but tab and newline (ESC colours a terminal, BEL rings,
# CR overwrites a line), DEL, C1 controls, lone surrogates and the two non-characters XML 1.0 forbids.
_UNPRINTABLE = re.compile(u"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _escape(match):
    code = ord(match.group(0))
    return "\\x%02x" % code if code <= 0xff else "\\u%04x" % code


def printable(text):
    """``'\\x1b[31mninja\\x07'`` -> ``'\\\\x1b[31mninja\\\\x07'``: visible escapes instead of control characters.

    A process may be named anything; its name must not colour the console or make the JUnit XML unparseable.
    """
    return _UNPRINTABLE.sub(_escape, text)


def result(name, ok, observed, expected, message, profile="common"):
    """One check: ``message`` is what a person reads when it fails, in words they can act on."""
    return {
        "name": name,
        "ok": bool(ok),
        "status": "ok" if ok else "failed",
        "observed": observed,
        "expected": expected,
        "message": message,
        "profile": profile,
    }


def unknown(name, expected, why, profile="common"):
    """A check whose facts could not be gathered: it fails, and says why, never passes silently."""
    entry = result(name, False, None, expected, "unknown: %s" % why, profile)
    entry["status"] = "unknown"
    return entry


def skipped(name, why, profile="common"):
    """A check the policy's profiles do not apply on this node; reported, not counted."""
    entry = result(name, True, None, None, "not applied: %s" % why, profile)
    entry["status"] = "skipped"
    return entry
