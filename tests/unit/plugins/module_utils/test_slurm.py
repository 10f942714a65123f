# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm drain/resume decisions from a table (ownership rules after NHC and mej/nhc#134)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _slurm

OURS = "gpufleet: available_memory: effective available memory 1Gi is below the 8Gi required"
T1 = "2026-12-01T20:00:00"
REC = dict(reason=OURS, time=T1)


def info(state, reason="", when="", user=""):
    return dict(node="node1", state=state, reason=reason, time=when, user=user)


# state, reason, time, ready, record, expected action, forget, words in the message
TABLE = [
    # not ready
    ("idle", "", "", False, None, "drain", False, "draining"),
    ("allocated", "", "", False, None, "drain", False, "draining"),
    ("mixed", "", "", False, REC, "drain", True, "draining"),               # stale record of an old drain: forgotten
    ("drained", "admin: bad fan", T1, False, None, "none", False, "someone else"),
    ("drained", "", "", False, None, "none", False, "no reason"),            # empty reason: not ours
    ("drained", OURS, T1, False, REC, "none", False, "drained by us already"),
    ("drained", OURS, "2026-12-01T21:00:00", False, REC, "none", True, "not a drain this collection recorded"),
    ("drained", "gpufleet: person", T1, False, None, "none", False, "our prefix"),
    ("draining", "gpufleet: older", T1, False, dict(reason="gpufleet: older", time=T1), "drain", False, "updated"),
    ("down*", "Not responding", T1, False, None, "none", False, "not responding"),
    ("idle*", "", "", False, None, "none", False, "not responding"),
    ("down", "admin", T1, False, None, "none", False, "down"),
    ("fail", "x", T1, False, None, "none", False, "fail"),
    ("maint", "", "", False, None, "none", False, "maint"),
    ("reserved", "", "", False, None, "none", False, "reserved"),
    ("idle@", "", "", False, None, "none", False, "rebooting"),
    ("planned", "", "", False, None, "none", False, "planned"),
    # ready
    ("drained", OURS, T1, True, REC, "resume", True, "resuming"),
    ("draining", OURS, T1, True, REC, "resume", True, "resuming"),
    ("drained", OURS, T1, True, None, "none", False, "our prefix"),            # a person's drain in our words
    ("drained", OURS, "2026-12-01T21:00:00", True, REC, "none", True, "someone else"),  # re-drained by a person later
    ("drained", "admin: bad fan", T1, True, REC, "none", True, "someone else"),
    ("drained", "", "", True, None, "none", False, "someone else"),
    ("drained*", OURS, T1, True, REC, "none", False, "left while"),
    ("down*", "", "", True, None, "none", False, "not responding"),
    ("idle", "", "", True, None, "none", False, "not drained"),
    ("idle", "", "", True, REC, "none", True, "not drained"),                 # someone resumed: record forgotten
]


@pytest.mark.parametrize("state,reason,when,ready,record,action,forget,words", TABLE)
def test_decide(state, reason, when, ready, record, action, forget, words):
    decision = _slurm.decide(info(state, reason, when, "root"), ready, record, OURS)
    assert decision["action"] == action, decision
    assert decision["forget"] == forget, decision
    assert words in decision["message"], decision


def test_reason_single_line_printable_bounded():
    failed = [dict(name="build_processes", message="2 build processes still running: ni\x1bnja\n(pid 5); wait for them"),
              dict(name="gpu_count", message="x")]
    reason = _slurm.drain_reason("gpufleet:", failed)
    assert reason == "gpufleet: build_processes: 2 build processes still running (+1 more)"
    long = _slurm.drain_reason("gpufleet:", [dict(name="c", message=u"é" * 500)], 80)
    assert len(long) == 80 and long.startswith("gpufleet: c: ") and all(0x20 <= ord(ch) < 0x7f for ch in long)
    assert _slurm.drain_reason("gpufleet:", []) == "gpufleet: not ready"


@pytest.mark.parametrize("prefix", ["", "two words", "x\n", "a" * 33, None, u"gpu\u00e9"])
def test_bad_prefix(prefix):
    with pytest.raises(ValueError, match="reason_prefix"):
        _slurm.validate_prefix(prefix)


def test_parse_sinfo():
    text = "drained|2026-12-01T20:00:00|root|gpufleet: a|b\ndrained|2026-12-01T20:00:00|root|gpufleet: a|b\n"
    assert _slurm.parse_sinfo(text, "n") == dict(node="n", state="drained", time=T1, user="root", reason="gpufleet: a|b")
    assert _slurm.parse_sinfo("idle|Unknown|Unknown|none\n", "n") == dict(node="n", state="idle", time="", user="", reason="")
    assert _slurm.parse_sinfo("", "n") is None


class FakeSlurm(object):
    """sinfo/scontrol answers as a real slurmctld would: the drain's time is set when it is set."""

    def __init__(self, state="idle", reason="", when="", fail=None):
        self.node = dict(state=state, reason=reason, time=when, user="root")
        self.calls = []
        self.fail = fail

    def run(self, argv):
        self.calls.append(argv)
        if self.fail:
            return 1, "", self.fail
        if argv[0].endswith("sinfo"):
            return 0, "%(state)s|%(time)s|%(user)s|%(reason)s\n" % self.node, ""
        if "State=DRAIN" in argv:
            self.node.update(state="drained", reason=argv[-1][len("Reason="):], time="2026-12-01T22:00:00")
        else:
            self.node.update(state="idle", reason="none", time="Unknown")
        return 0, "", ""


def test_apply_drain_then_resume(tmp_path):
    slurm = FakeSlurm()
    failed = [dict(name="available_memory", message="low: do x")]
    out = _slurm.apply("node1", False, failed, slurm.run, lambda n: "/usr/bin/" + n, state_dir=str(tmp_path))
    assert out["action"] == "drain" and out["changed"] and out["reason"] == "gpufleet: available_memory: low"
    assert json.loads((tmp_path / "slurm-node1.json").read_text())["time"] == "2026-12-01T22:00:00"
    out = _slurm.apply("node1", True, [], slurm.run, lambda n: "/usr/bin/" + n, state_dir=str(tmp_path))
    assert out["action"] == "resume" and not os.path.exists(str(tmp_path / "slurm-node1.json"))


def test_apply_check_mode_changes_nothing(tmp_path):
    slurm = FakeSlurm()
    out = _slurm.apply("node1", False, [], slurm.run, lambda n: n, state_dir=str(tmp_path), check_mode=True)
    assert out["changed"] and "check mode" in out["message"] and len(slurm.calls) == 1
    assert not os.listdir(str(tmp_path))


@pytest.mark.parametrize("stderr,words", [
    ("slurm_load_partitions: Unable to contact slurm controller (connect failure)", "slurmctld is unreachable"),
    ("weird", "sinfo exited 1: weird"),
])
def test_apply_errors_change_nothing(tmp_path, stderr, words):
    slurm = FakeSlurm(fail=stderr)
    out = _slurm.apply("node1", False, [], slurm.run, lambda n: n, state_dir=str(tmp_path))
    assert words in out["error"] and not out["changed"] and len(slurm.calls) == 1


def test_apply_missing_tool_and_unknown_node(tmp_path):
    out = _slurm.apply("node1", False, [], lambda a: (0, "", ""), lambda n: None, state_dir=str(tmp_path))
    assert "sinfo not found" in out["error"]
    out = _slurm.apply("node9", False, [], lambda a: (0, "", ""), lambda n: n, state_dir=str(tmp_path))
    assert "does not know this node" in out["error"] and not out["changed"]


def test_broken_record_is_not_trusted(tmp_path):
    (tmp_path / "slurm-node1.json").write_text("{not json")
    assert _slurm.read_record(str(tmp_path), "node1") is None


# ---------------------------------------------------------------- issue 27.2 / 28.6 / 28.7

HUNG = ("unknown: nvidia-smi state is timeout: nvidia-smi did not answer within 10s and was killed: the driver may be "
        "wedged; check `dmesg | grep -i xid` and consider a GPU reset or reboot")


def find(name):
    return "/usr/bin/" + name


@pytest.mark.parametrize("name", ["gpu[1-8]", "ALL", "all", "a,b", "a b", "", "-x", "n\n1", None, "x" * 65])
def test_node_names_slurm_reads_as_many_are_refused(tmp_path, name):
    with pytest.raises(ValueError, match="not one Slurm node name"):
        _slurm.validate_node_name(name)
    slurm = FakeSlurm()
    out = _slurm.apply(name, False, [], slurm.run, find, state_dir=str(tmp_path))
    assert "not one Slurm node name" in out["error"] and not slurm.calls and not out["changed"]


def test_reason_names_the_real_cause():
    failed = [dict(name="gpu_count", message=HUNG)] + [dict(name="c%d" % i, message=HUNG) for i in range(5)]
    assert _slurm.drain_reason("gpufleet:", failed) == "gpufleet: gpu_count: nvidia-smi did not answer within 10s (+5 more)"
    assert _slurm.cause("effective available memory 1Gi is below the 8Gi required: free memory; or x") == \
        "effective available memory 1Gi is below the 8Gi required"


@pytest.mark.parametrize("message, short", [
    ("GPU 1 (00000000:2A:00.0, NVIDIA H100 80GB HBM3, serial 1654123038646, GPU-dd3b269a-8f3a-d2d5-1518-2713ba03fcf7) "
     "has fabric state In Progress: start it", "GPU 1 (00000000:2A:00.0) has fabric state In Progress"),
    ("GPU 0 (00000000:02:00.0, NVIDIA GeForce RTX 5090, GPU-ea2294a3) is at 91 C; GPU 3 (0000:5D:00.0, NVIDIA B200) is at 90 C",
     "GPU 0 (00000000:02:00.0) is at 91 C"),
    ("GPU 0 (not a bus id, x) is odd", "GPU 0 (not a bus id, x) is odd"),  # not a GPU identity: left as it is
])
def test_a_gpu_is_named_by_its_bus_id_so_the_fault_fits_the_reason(message, short):
    """Issue 30: the full identity (name, serial, UUID: about 100 characters) filled the 120-character reason and
    the 80-character NPD line, cut before the fault was said. The reports keep the whole."""
    assert _slurm.cause(message) == short
    assert _slurm.short_message(message) == short
    assert _slurm.drain_reason("gpufleet:", [dict(name="fabric", message=message)]) == "gpufleet: fabric: " + short


def test_reason_kept_while_the_same_checks_fail(tmp_path):
    slurm = FakeSlurm()
    first = _slurm.apply("node1", False, [dict(name="available_memory", message="1Gi is below 8Gi: free it")], slurm.run,
                         find, state_dir=str(tmp_path))
    assert first["action"] == "drain" and slurm.node["reason"] == "gpufleet: available_memory: 1Gi is below 8Gi"
    when = slurm.node["time"]
    slurm.calls[:] = []
    again = _slurm.apply("node1", False, [dict(name="available_memory", message="2Gi is below 8Gi: free it")], slurm.run,
                         find, state_dir=str(tmp_path))
    assert again["action"] == "none" and "reason kept while the same checks fail" in again["message"]
    assert slurm.node["reason"] == "gpufleet: available_memory: 1Gi is below 8Gi" and slurm.node["time"] == when
    assert not [call for call in slurm.calls if "update" in call]
    other = _slurm.apply("node1", False, [dict(name="build_processes", message="1 build process still running: x")],
                         slurm.run, find, state_dir=str(tmp_path))
    assert other["action"] == "drain" and slurm.node["reason"] == "gpufleet: build_processes: 1 build process still running"


def test_drain_only_never_resumes(tmp_path):
    slurm = FakeSlurm()
    _slurm.apply("node1", False, [dict(name="a", message="bad")], slurm.run, find, state_dir=str(tmp_path), resume=False)
    out = _slurm.apply("node1", True, [], slurm.run, find, state_dir=str(tmp_path), resume=False)
    assert out["action"] == "none" and "drain-only mode" in out["message"] and slurm.node["state"] == "drained"
    assert os.path.exists(str(tmp_path / "slurm-node1.json"))  # still ours: a later normal run may resume it
    assert _slurm.apply("node1", True, [], slurm.run, find, state_dir=str(tmp_path))["action"] == "resume"


class PersonInTheWindow(FakeSlurm):
    """A person drains the node between our first sinfo and our scontrol."""

    def run(self, argv):
        if argv[0].endswith("sinfo") and len([c for c in self.calls if c[0].endswith("sinfo")]) == 1:
            self.node.update(state="drained", reason="admin: bad fan", time="2026-12-01T22:30:00")
        return FakeSlurm.run(self, argv)


def test_a_drain_set_between_sinfo_and_scontrol_is_never_overwritten(tmp_path):
    slurm = PersonInTheWindow()
    out = _slurm.apply("node1", False, [dict(name="a", message="bad")], slurm.run, find, state_dir=str(tmp_path))
    assert out["action"] == "none" and not out["changed"] and "changed between our read and our update" in out["message"]
    assert slurm.node["reason"] == "admin: bad fan" and not [call for call in slurm.calls if "update" in call]


class KilledAfterScontrol(FakeSlurm):
    def run(self, argv):
        answer = FakeSlurm.run(self, argv)
        if "State=DRAIN" in argv:
            raise KeyboardInterrupt("killed right after the drain")
        return answer


def test_a_run_killed_between_drain_and_record_still_owns_its_drain(tmp_path):
    """Issue 28.6: the intent is recorded before scontrol, so the drain is adopted and resumed later."""
    slurm = KilledAfterScontrol()
    slurm.node["time"] = ""
    with pytest.raises(KeyboardInterrupt):
        _slurm.apply("node1", False, [dict(name="a", message="bad")], slurm.run, find, state_dir=str(tmp_path))
    slurm.node["time"] = time.strftime("%Y-%m-%dT%H:%M:%S")  # slurmctld's time of the drain: now
    record = _slurm.read_record(str(tmp_path), "node1")
    assert record["pending"]["reason"] == "gpufleet: a: bad" and not record["time"]
    out = _slurm.apply("node1", True, [], FakeSlurm.run.__get__(slurm), find, state_dir=str(tmp_path))
    assert out["action"] == "resume" and slurm.node["state"] == "idle"


def test_a_pending_intent_never_adopts_an_older_drain(tmp_path):
    record = dict(pending=dict(reason="gpufleet: a: bad", checks=["a"], at=time.time()))
    old = info("drained", "gpufleet: a: bad", "2020-01-01T00:00:00")
    assert not _slurm.owned(old, record)
    assert _slurm.owned(info("drained", "gpufleet: a: bad", time.strftime("%Y-%m-%dT%H:%M:%S")), record)


# state, reason, at_start (slurmd runs the check), expected action -- issue 38.2: drained before slurmd registers
AT_START = [
    ("down*", "Not responding", True, "drain"),       # slurmctld's view before the registration
    ("idle*", "", True, "drain"),
    ("unknown*", "", True, "drain"),
    ("down*", "Not responding", False, "none"),       # from cron or the playbook: not responding is left alone
    ("down*", "admin: PSU swap", True, "none"),        # a person's down: their reason kept
    ("down", "", True, "none"),                        # down and responding: someone's business
    ("drained*", "admin: bad fan", True, "none"),
    ("mixed*", "", True, "none"),                      # jobs on it: not a registration
    ("idle~", "", True, "none"),                       # powered down
]


@pytest.mark.parametrize("state, reason, at_start, action", AT_START)
def test_a_node_not_yet_registered_is_drained_by_slurmds_own_run(state, reason, at_start, action):
    decision = _slurm.decide(info(state, reason, T1 if reason else ""), False, None, "gpufleet: x: y", at_start=at_start)
    assert decision["action"] == action, decision
    if action == "drain":
        assert "before slurmd registers" in decision["message"]


def test_apply_drains_a_node_before_slurmd_registers(tmp_path):
    slurm = FakeSlurm(state="down*", reason="Not responding", when=T1)
    failed = [dict(name="build_processes", message="1 build process still running")]
    out = _slurm.apply("node1", False, failed, slurm.run, lambda n: "/usr/bin/" + n, state_dir=str(tmp_path), at_start=True)
    assert out["action"] == "drain" and out["changed"] and out["error"] is None, out
    out = _slurm.apply("node1", False, failed, slurm.run, lambda n: "/usr/bin/" + n, state_dir=str(tmp_path))
    assert out["action"] == "none" and "drained by us already" in out["message"], out
