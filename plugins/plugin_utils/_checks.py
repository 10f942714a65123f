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
