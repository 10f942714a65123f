# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shape of one readiness check, shared by every check function (controller and node-local health check).

A check function takes ``(facts, policy)`` -- ``facts`` is the dict of gathered subsets keyed
without the ``gpufleet_`` prefix (``facts['memory']``), ``policy`` the validated options, read through
:func:`option` -- and returns ``result(...)``, ``unknown(...)``, ``skipped(...)`` or ``None`` (not applicable under
this policy). Every check is registered once, in ``_policy.CHECKS``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options

# Characters no report may carry raw: C0 controls but tab and newline (ESC colours a terminal, BEL rings,
# CR overwrites a line), DEL, C1 controls, lone surrogates and the two non-characters XML 1.0 forbids.
_UNPRINTABLE = re.compile(u"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _escape(match):
    code = ord(match.group(0))
    return "\\x%02x" % code if code <= 0xff else "\\u%04x" % code


# Unicode format characters (category Cf: bidi overrides and isolates, zero-width characters, the BOM, tag
# characters) and the line/paragraph separators: an override (U+202E) reverses what the console shows after it.
_FORMAT = re.compile(u"[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e"
                     u"\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]|\U000110bd|\U000110cd|[\U00013430-\U0001343f]"
                     u"|[\U0001bca0-\U0001bca3]|[\U0001d173-\U0001d17a]|\U000e0001|[\U000e0020-\U000e007f]")


def _escape_format(match):
    code = ord(match.group(0))
    return "\\u%04x" % code if code <= 0xffff else "\\U%08x" % code


def printable(text):
    """``'\\x1b[31mninja\\x07'`` -> ``'\\\\x1b[31mninja\\\\x07'``: visible escapes instead of control characters,
    and of format characters (``'ld.\\u202e'`` -> ``'ld.\\\\u202e'``).

    A process may be named anything; its name must not colour the console, reverse the text after it (a bidi
    override) or make the JUnit XML unparseable.
    """
    return _FORMAT.sub(_escape_format, _UNPRINTABLE.sub(_escape, text))


def option(policy, key):
    """The policy's value of one option, or its one declared default (a partial policy is fine for tests and callers).

    The only way a check reads an option, so ``_policy.CHECKS`` can say (and a test verify) which options each reads.
    """
    policy = policy or {}
    return policy[key] if key in policy else _readiness_options.default(key)


def describe_age(seconds):
    """``7380`` -> ``2h 03m``; short ages in seconds or minutes."""
    seconds = int(seconds or 0)
    if seconds < 60:
        return "%ds" % seconds
    if seconds < 3600:
        return "%dm %02ds" % (seconds // 60, seconds % 60)
    if seconds < 86400:
        return "%dh %02dm" % (seconds // 3600, seconds % 3600 // 60)
    return "%dd %02dh" % (seconds // 86400, seconds % 86400 // 3600)


def result(name, ok, observed, expected, message, profile="always"):
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


def unknown(name, expected, why, profile="always"):
    """A check whose facts could not be gathered: it fails, and says why, never passes silently."""
    entry = result(name, False, None, expected, "unknown: %s" % why, profile)
    entry["status"] = "unknown"
    return entry


def skipped(name, why, profile="always"):
    """A check the policy's profiles do not apply on this node; reported, not counted."""
    entry = result(name, True, None, None, "not applied: %s" % why, profile)
    entry["status"] = "skipped"
    return entry
