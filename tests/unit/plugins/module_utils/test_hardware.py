# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_hardware: D-state processes, CPU governors and NVMe health read from fixture trees, each part absent with why."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _hardware as hw
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _node_facts
from ansible_collections.gpufleet.preflight.tests.unit.conftest import fixture_reader

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "hardware")

text = fixture_reader(FIXTURES)


def smart_run(outputs):
    def run(argv, timeout):
        return outputs[argv[2]]
    return run


@pytest.mark.parametrize("line, parsed", [
    ("101 (nfs worker (x)) D 2 0 0 0 -1 4 0 0 0 0 0 12 0 0 20 0 1 0 5123 0", (101, "nfs worker (x)", "D", 5123)),
    ("7 (a) S 1", (7, "a", "S", None)),
    ("garbage", None),
])
def test_parse_stat(line, parsed):
    assert hw.parse_stat(line) == parsed


def test_stuck_needs_the_same_process_in_both_scans():
    first = [(1, "a", "D", 10), (2, "b", "D", 20), (3, "c", "S", 30)]
    second = [(1, "a", "D", 10), (2, "b", "D", 99), (3, "c", "D", 30)]
    assert hw.stuck(first, second) == [(1, "a")]


@pytest.mark.parametrize("name, health", [
    ("nvme-smart-log-healthy.json", {"critical_warning": 0, "available_spare": 100, "available_spare_threshold": 10,
                                     "percentage_used": 3, "media_errors": 0, "error_log_entries": 12}),
    ("nvme-smart-log-failing.json", {"critical_warning": 4, "available_spare": 5, "available_spare_threshold": 10,
                                     "percentage_used": 104, "media_errors": 17, "error_log_entries": 244}),
])
def test_parse_smart_log(name, health):
    assert hw.parse_smart_log(text(name)) == health


@pytest.mark.parametrize("out", ["not json", "[]", '{"temperature": 300}'])
def test_parse_smart_log_refuses_other_output(out):
    assert hw.parse_smart_log(out) is None


def test_every_part_on_the_gpu_node_tree():
    outputs = {"/dev/nvme0": (0, text("nvme-smart-log-healthy.json"), ""),
               "/dev/nvme1": (0, text("nvme-smart-log-failing.json"), "")}
    facts = hw.collect_hardware(hw.PARTS, smart_run(outputs), root=os.path.join(FIXTURES, "gpu_node"),
                                nvme_program="/usr/sbin/nvme", d_state_interval=0)
    assert facts["d_state"]["count"] == 2
    assert [(p["pid"], p["name"], p["wchan"]) for p in facts["d_state"]["processes"]] == [
        (101, "nfs worker (x)", "nfs_wait_bit_killable"), (103, "jbd2/nvme0n1p", "jbd2_journal_commit_transaction")]
    assert facts["cpu_governor"] == {"state": "ok", "message": "", "governors": {"performance": 2, "powersave": 2}}
    nvme = dict((dev["name"], dev) for dev in facts["nvme"]["devices"])
    assert nvme["nvme0"]["model"] == "SAMSUNG MZWLR3T8HBLS-00007" and nvme["nvme1"]["media_errors"] == 17


def test_absent_parts_say_why(tmp_path):
    facts = hw.collect_hardware(hw.PARTS, None, root=os.path.join(FIXTURES, "vm"), d_state_interval=0)
    assert facts["d_state"]["count"] == 0
    assert facts["cpu_governor"]["state"] == "absent" and "no cpufreq driver" in facts["cpu_governor"]["message"]
    assert facts["nvme"]["state"] == "absent" and "no NVMe controller" in facts["nvme"]["message"]
    empty = os.path.join(str(tmp_path), "bin")
    os.mkdir(empty)
    old = os.environ.get("PATH")
    os.environ["PATH"] = empty
    try:
        no_cli = hw.read_nvme(None, root=os.path.join(FIXTURES, "gpu_node"))
    finally:
        os.environ["PATH"] = old
    assert no_cli["state"] == "absent" and "nvme-cli is not installed" in no_cli["message"]
    assert [dev["name"] for dev in no_cli["devices"]] == ["nvme0", "nvme1"]


def test_a_failing_or_late_smart_log_is_named():
    outputs = {"/dev/nvme0": (None, "", ""), "/dev/nvme1": (1, "", "permission denied")}
    nvme = hw.read_nvme(smart_run(outputs), root=os.path.join(FIXTURES, "gpu_node"), program="/usr/sbin/nvme")
    assert [dev["error"] for dev in nvme["devices"]] == ["nvme smart-log: timed out", "nvme smart-log: permission denied"]
    late = hw.read_nvme(smart_run(outputs), root=os.path.join(FIXTURES, "gpu_node"), program="nvme", deadline=0)
    assert late["devices"][0]["error"] == "not read: the hardware deadline passed"


def test_node_facts_refuses_an_unknown_part():
    params = {"gather_subset": ["node"], "build_process_names": [], "build_process_patterns": [], "gpu_timeout": 10,
              "kernel_events_window": 60, "toolchain_python": None, "disk_paths": [], "node_hardware": ["ipmi"]}
    with pytest.raises(ValueError, match="node_hardware: ipmi unknown"):
        _node_facts.validate_options(params, _node_facts.SUBSETS)


def ipmi_run(sel_name="ipmitool-sel-elist-before.txt", sensor_rc=0):
    def run(argv, timeout):
        if argv[1:] == ["sel", "elist"]:
            return 0, text(sel_name), ""
        return sensor_rc, text("ipmitool-sensor.txt") if sensor_rc == 0 else "", (
            "" if sensor_rc == 0 else "Could not open device at /dev/ipmi0 or /dev/ipmi/0 or /dev/ipmidev/0: No such file or directory")
    return run


def test_parse_sel_and_new_entries():
    before = hw.parse_sel(text("ipmitool-sel-elist-before.txt"))
    after = hw.parse_sel(text("ipmitool-sel-elist-after.txt"))
    assert [e["id"] for e in after] == [1, 2, 3, 4, 5, 6]
    assert after[4] == {"id": 5, "when": "12/04/2026 21:02:10", "sensor": "Memory #0x53",
                        "event": "Correctable ECC (@DIMM B3)", "direction": "Asserted"}
    assert [e["id"] for e in hw.new_sel_entries(after, 4)] == [5, 6]
    assert hw.new_sel_entries(after, None) == []
    assert [e["id"] for e in hw.new_sel_entries(before, 6)] == [1, 2, 3, 4]  # cleared since: all new
    assert hw.parse_sel("SEL has no entries\n") == []


def test_sel_since_the_previous_run(tmp_path):
    first = hw.collect_hardware(("ipmi_sel",), ipmi_run(), state_dir=str(tmp_path), ipmitool="ipmitool")["ipmi_sel"]
    assert first["first_run"] is True and first["count"] == 4 and first["new_count"] == 0
    second = hw.collect_hardware(("ipmi_sel",), ipmi_run("ipmitool-sel-elist-after.txt"), state_dir=str(tmp_path),
                                 ipmitool="ipmitool")["ipmi_sel"]
    assert second["first_run"] is False and second["new_count"] == 2
    assert [e["event"] for e in second["new"]] == ["Correctable ECC (@DIMM B3)", "Bus Uncorrectable error"]
    stateless = hw.collect_hardware(("ipmi_sel",), ipmi_run(), ipmitool="ipmitool")["ipmi_sel"]
    assert stateless["first_run"] is True


def test_sensors_and_a_node_without_a_bmc():
    sensors = hw.collect_hardware(("sensors",), ipmi_run(), ipmitool="ipmitool")["sensors"]
    listed = [(s["name"], s["status"]) for s in sensors["sensors"]]
    assert listed == [("CPU2 Temp", "cr"), ("Inlet Temp", "nc"), ("PSU2 Status", "0x0080")]
    no_bmc = hw.collect_hardware(("sensors",), ipmi_run(sensor_rc=1), ipmitool="ipmitool")["sensors"]
    assert no_bmc["state"] == "absent" and "Could not open device" in no_bmc["message"]
    late = hw.read_sensors(ipmi_run(), deadline=0, program="ipmitool")
    assert late["state"] == "error" and "deadline" in late["message"]
