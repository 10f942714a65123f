# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remediation ladder's decisions (issue 38 item 2): table-driven, pure."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _remediation as rem

NOW = 1800000000.0
GPUS = {"gpus": {"devices": [{"index": 0, "pci_bus_id": "00000000:1B:00.0", "uuid": "GPU-a"},
                             {"index": 1, "pci_bus_id": "00000000:2A:00.0", "uuid": "GPU-b"}]}}


def xid_facts(*events):
    """Kernel facts holding Xid events ``(code, pci, age seconds)``."""
    xids = [dict(code=code, pci=pci, age_seconds=age, message="Xid %d" % code) for code, pci, age in events]
    return dict(GPUS, kernel_events={"xids": xids, "window_seconds": 86400})


FAILED_XID = [{"name": "fatal_xid", "status": "failed"}]
SETTINGS = rem.validate(dict(enabled=True, reset_classes=["reset_gpu", "row_remap"], reboot_classes=["reboot"]))


def past(fault, step, days_ago, state="done"):
    return rem.entry(dict(fault=fault, step=step, why="earlier"), NOW - days_ago * 86400, state, "earlier")


def test_faults_are_occurrences_read_from_the_failed_checks_only():
    facts = xid_facts((48, "0000:1b:00", 60), (13, "0000:1b:00", 30), (79, "0000:2a:00", 10), (48, "0000:1b:00", 110))
    faults = rem.faults_of(FAILED_XID, facts, NOW)
    # Xid 13 is the application's (restart_app): no node step; two Xid 48 lines 50 s apart are one occurrence.
    assert [(f["kind"], f["cls"], f["gpu"]) for f in faults] == [
        ("xid 48 on 0000:1b:00", "reset_gpu", 0), ("xid 79 on 0000:2a:00", "reboot", 1)]
    assert rem.faults_of([{"name": "fatal_xid", "status": "ok"}], facts, NOW) == []
    remap = [{"name": "row_remap", "status": "failed", "observed": {"pending": [1], "failure": []}}]
    assert [(f["cls"], f["kind"], f["logged_at"]) for f in rem.faults_of(remap, GPUS, NOW)] == [
        ("row_remap", "row remap pending on GPU 1", None)]


@pytest.mark.parametrize("events, history, busy, expected", [
    # a first Xid 48 on an idle GPU: reset it
    ([(48, "0000:1b:00", 60)], [], {}, ["reset_gpu"]),
    # the same GPU in use: no reset, and why
    ([(48, "0000:1b:00", 60)], [], {0: "pid 7 (python3)"}, ["none:in use by pid 7"]),
    # the same kernel line read again after its reset: already acted on, never a second reset
    ([(48, "0000:1b:00", 60)], [("same", "reset_gpu", 0)], {}, ["none:already acted on"]),
    # a third Xid 48 on that GPU within the week: escalate, no reset
    ([(48, "0000:1b:00", 60)], [("other1", "reset_gpu", 3), ("other2", "reset_gpu", 1)], {}, ["escalate"]),
    # two earlier ones, but one outside the window: a reset again
    ([(48, "0000:1b:00", 60)], [("other1", "reset_gpu", 9), ("other2", "reset_gpu", 1)], {}, ["reset_gpu"]),
    # a reset that was refused (busy) or only said in check mode does not count toward escalation
    ([(48, "0000:1b:00", 60)], [("other1", "reset_gpu", 1, "refused"), ("other2", "reset_gpu", 1, "check")], {},
     ["reset_gpu"]),
    # escalated already this week: once per kind per window
    ([(48, "0000:1b:00", 60)], [("other1", "reset_gpu", 3), ("other2", "reset_gpu", 2), ("other3", "escalate", 1)], {},
     ["none:escalated already"]),
    # two reboot-class faults: one reboot
    ([(79, "0000:1b:00", 60), (79, "0000:2a:00", 60)], [], {}, ["reboot", "none:one reboot covers it"]),
    # a class with no step enabled: the drain stands
    ([(74, "0000:1b:00", 60)], [], {}, ["none:in neither reset_classes nor reboot_classes"]),
    # an Xid on a GPU the node does not list: no reset
    ([(48, "0000:99:00", 60)], [], {}, ["none:not among the node's GPUs"]),
])
def test_decide(events, history, busy, expected):
    facts = xid_facts(*events)
    faults = rem.faults_of(FAILED_XID, facts, NOW)
    first = faults[0]
    records = []
    for item in history:
        which, step, days = item[:3]
        state = item[3] if len(item) > 3 else "done"
        fault = dict(first, logged_at=first["logged_at"] + (0 if which == "same" else 3600 * int(which[-1])))
        records.append(past(fault, step, days, state))
    steps = rem.decide(faults, SETTINGS, records, NOW, busy)
    assert len(steps) == len(expected)
    for step, want in zip(steps, expected):
        name, _sep, words = want.partition(":")
        assert step["step"] == name, (step, want)
        assert words in step["why"], (step, want)


def test_a_pending_state_still_there_after_its_step_escalates():
    remap = [{"name": "row_remap", "status": "failed", "observed": {"pending": [1], "failure": []}}]
    fault = rem.faults_of(remap, GPUS, NOW)[0]
    assert rem.decide([fault], SETTINGS, [], NOW, {})[0]["step"] == "reset_gpu"
    after = [past(fault, "reset_gpu", 0)]
    step = rem.decide([fault], SETTINGS, after, NOW, {})[0]
    assert step["step"] == "escalate" and "still there after reset_gpu" in step["why"], step


@pytest.mark.parametrize("settings, words", [
    (dict(enabled="yes"), "enabled must be true or false"),
    (dict(reset_classes=["reboot_now"]), "reset_classes must be a list of"),
    (dict(escalate_after=0), "escalate_after must be a whole number from 1"),
    (dict(window_seconds=True), "window_seconds must be a whole number"),
    (dict(ticket_command="ticket.sh"), "ticket_command must be null or a list"),
    (dict(ticket_command=["ticket.sh"]), "starting with an absolute path"),
    (dict(reset_class=["reset_gpu"]), "unknown keys reset_class"),
])
def test_settings_refused_in_words(settings, words):
    with pytest.raises(ValueError) as caught:
        rem.validate(settings)
    assert words in str(caught.value)


def test_history_kept_within_the_window_and_read_back(tmp_path):
    path = rem.history_path(str(tmp_path), "gpu/1")
    assert path.endswith("remediation-gpu_1.json") and rem.read_history(path) == []
    fault = rem.faults_of(FAILED_XID, xid_facts((48, "0000:1b:00", 60)), NOW)[0]
    old, new = past(fault, "reset_gpu", 30), past(fault, "reset_gpu", 1)
    kept = rem.write_history(path, [old, new], 200, NOW, SETTINGS["window_seconds"])
    assert kept == [new] and rem.read_history(path) == [new]
    with open(path, "w") as handle:
        handle.write("{not json")
    with pytest.raises(ValueError) as caught:
        rem.read_history(path)
    assert "not JSON" in str(caught.value) and "move it aside" in str(caught.value)
    with open(path, "w") as handle:
        json.dump({"a": 1}, handle)
    with pytest.raises(ValueError):
        rem.read_history(path)


def test_a_second_and_third_xid_read_together_reset_then_escalate():
    facts = xid_facts((48, "0000:1b:00", 600), (48, "0000:1b:00", 300), (48, "0000:1b:00", 60))
    faults = rem.faults_of(FAILED_XID, facts, NOW)
    first = [past(faults[2], "reset_gpu", 0)]  # the newest was reset on an earlier run
    assert [s["step"] for s in rem.decide(faults, SETTINGS, first, NOW, {})] == ["reset_gpu", "escalate", "none"]
