# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet gate: from a report's counts and ``preflight_max_not_ready`` (a count or a percentage), stop the run or
let it go on, with the sentence every report and the console show. Pure."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness._checks import printable


def too_many_not_ready(report, max_not_ready):
    """``(abort, why)`` for ``preflight_max_not_ready``: a count (``2``) or a percentage (``'25%'``).

    Unreachable hosts count as not ready. ValueError names the option when the limit is neither.
    """
    limit, shown = _limit(report, max_not_ready)
    if limit is None:
        return False, None
    bad = report["summary"]["not_ready"] + report["summary"]["unreachable"]
    if bad > limit:
        return True, "%d of %d hosts are not ready or unreachable, more than preflight_max_not_ready=%s allows" % (
            bad, report["summary"]["total"], shown)
    return False, None


def _limit(report, max_not_ready):
    """``(hosts allowed, how to say it)`` or ``(None, None)`` for no limit."""
    if max_not_ready is None or max_not_ready == "":
        return None, None
    text = str(max_not_ready).strip()
    total = report["summary"]["total"]
    try:
        if text.endswith("%"):
            percent = float(text[:-1])
            if not 0 <= percent <= 100:
                raise ValueError()
            limit = int(total * percent / 100.0)
            return limit, "%s (%d of %d hosts)" % (text, limit, total)
        limit = int(text)
        if limit < 0 or str(limit) != text:
            raise ValueError()
        return limit, text
    except ValueError:
        raise ValueError("preflight_max_not_ready: %r is neither a count of hosts (like 2) nor a percentage (like 25%%)" % (max_not_ready,))


def gate(report, max_not_ready, stop_when_none_ready=True):
    """The gate's decision, as every report shows it and the action returns it::

        {decision: stop | continue, abort: bool, reason: a sentence, not_ready: hosts not ready or unreachable,
         total, max_not_ready: the limit as given (None: no limit), allowed: hosts the limit allows (None: no limit)}
    """
    allowed, shown = _limit(report, max_not_ready)
    abort, why = too_many_not_ready(report, max_not_ready)
    bad = report["summary"]["not_ready"] + report["summary"]["unreachable"]
    total = report["summary"]["total"]
    if total and bad == total and stop_when_none_ready:
        # Whatever the limit: otherwise the later plays "provision" no host and the run exits 0 (issue 27 item 1).
        abort, why = True, "none of the %d host%s is ready: nothing to go on with" % (total, "" if total == 1 else "s")
    elif allowed is None:
        why = "no preflight_max_not_ready: no limit; %d of %d hosts are not ready or unreachable" % (bad, total)
    elif not abort:
        why = "%d of %d hosts are not ready or unreachable, within preflight_max_not_ready=%s" % (bad, total, shown)
    return dict(decision="stop" if abort else "continue", abort=abort, reason=why, not_ready=bad, total=total,
                max_not_ready=None if allowed is None else printable(str(max_not_ready).strip()), allowed=allowed)


def gate_line(report):
    """``Gate: stop - 6 of 8 hosts ...``, or None when no gate was evaluated for this report."""
    decision = report.get("gate")
    if not isinstance(decision, dict) or not decision.get("decision"):
        return None
    if decision["decision"] == "stop":
        return "Gate: STOPPED THE RUN - %s" % decision.get("reason")
    return "Gate: continue - %s" % decision.get("reason")


def run_stats(results, gate):
    """What the preflight publishes to the run's stats (set_stats data, for AWX workflows): every host's verdict and
    the gate's decision. ``results``: {host: registered readiness result or None}, in the play's host order."""
    nodes = {}
    for host, result in results.items():
        result = result or {}
        unreachable = result.get("unreachable", False)
        nodes[host] = dict(ready=bool(result.get("ready", False) and not unreachable), unreachable=unreachable,
                           failed_checks=result.get("failed_checks", []),
                           message=result["message"] if "message" in result else result.get("msg", "not checked"))
    return dict(gate=dict({"decision": "stop" if gate.get("abort") else "continue"}, **gate),
                ready=[host for host, node in nodes.items() if node["ready"]],
                not_ready=[host for host, node in nodes.items() if not node["ready"]],
                nodes=nodes)
