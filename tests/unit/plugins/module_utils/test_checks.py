# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/_readiness/_checks.py: the shape of a check, and text made safe for a console and XML."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import printable, result, skipped, unknown


@pytest.mark.parametrize("raw, shown", [
    ("ninja", "ninja"),
    ("cc1plus x2\tok\nnext", "cc1plus x2\tok\nnext"),       # tab and newline kept; tables fold them
    ("\x1b[31mninja\x07", "\\x1b[31mninja\\x07"),
    ("a\rb\x00c\x7fd", "a\\x0db\\x00c\\x7fd"),
    ("\x9bC1", "\\x9bC1"),
    ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
    ("\ufffe\uffff", "\\ufffe\\uffff"),
    ("Blackwell \u2013 GPU \U0001F680", "Blackwell \u2013 GPU \U0001F680"),  # ordinary Unicode untouched
    # format characters: a bidi override reversed the console's verdict line after a process name
    ("ld.<img>\u202e|gnp.exe", "ld.<img>\\u202e|gnp.exe"),
    ("a\u200bb\u2066c\ufeffd\u2028e\U000e0041", "a\\u200bb\\u2066c\\ufeffd\\u2028e\\U000e0041"),
])
def test_printable(raw, shown):
    assert printable(raw) == shown


def test_a_process_name_with_a_bidi_override_is_escaped_in_the_verdict():
    """Issue 18 finding 13: ``ld.<img ...>`` + U+202E reached the console's readiness verdict raw."""
    from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._policy import describe_processes
    text = describe_processes([{"name": u"ld.<img src=x>\u202e|gnp.exe", "pid": 5, "orphaned": True, "age_seconds": 61}])
    assert u"\u202e" not in text
    assert text.startswith("ld.<img src=x>\\u202e|gnp.exe (pid 5, orphaned")


def test_unknown_fails_and_skipped_passes():
    assert unknown("x", ">= 1", "not gathered")["ok"] is False
    assert skipped("x", "profile off")["status"] == "skipped" and skipped("x", "profile off")["ok"] is True
    assert result("x", True, 1, 1, "")["status"] == "ok"
