# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpus probes (issue 30): nvlink -s / -e and -q parsers on captured output, and the probes run for real against
the stand-in nvidia-smi, one of them hung."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _gpu_probes, _gpus
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "gpus")
STUB = os.path.normpath(os.path.join(HERE, "..", "..", "..", "fleet", "stubs", "nvidia-smi"))
ALL = ("nvlink_status", "nvlink_errors", "query")


def read(scenario, name):
    with open(os.path.join(FIXTURES, scenario, name)) as handle:
        return handle.read()


def test_nvlink_status_of_h100_has_18_links_up():
    gpus = _gpu_probes.parse_nvlink_status(read("h100_x2_nvswitch", "nvlink-s.txt"))
    assert sorted(gpus) == ["GPU-4039dfe4-0c97-4b1e-683e-eb7d42699053", "GPU-dd3b269a-8f3a-d2d5-1518-2713ba03fcf7"]
    links = gpus["GPU-4039dfe4-0c97-4b1e-683e-eb7d42699053"]["links"]
    assert len(links) == 18 and set(links.values()) == {26.562}


def test_inactive_link_is_none_and_a_gpu_without_links_has_none():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aa)\n         Link 0: 26.562 GB/s\n         Link 1: <inactive>\n"
            "GPU 1: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-bb)\n")
    gpus = _gpu_probes.parse_nvlink_status(text)
    assert gpus["GPU-aa"]["links"] == {0: 26.562, 1: None}
    assert gpus["GPU-bb"]["links"] == {}
    assert (gpus["GPU-aa"]["state"], gpus["GPU-bb"]["state"]) == ("links", "none")


@pytest.mark.parametrize("under, state, note", [
    ("\t NVML: Unable to retrieve NVLink information as all links are inActive\n", "all_inactive", None),
    ("\t [Unknown Error]\n", "unreadable", "[Unknown Error]"),
    ("\t Link 0: <inactive>\n\t [Unknown Error]\n", "unreadable", "[Unknown Error]"),
])
def test_what_the_driver_prints_instead_of_links_is_kept(under, state, note):
    """Every link down prints no ``Link`` line, only NVML's sentence: never the same as a GPU listed alone."""
    gpus = _gpu_probes.parse_nvlink_status("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aa)\n" + under)
    assert gpus["GPU-aa"]["state"] == state and gpus["GPU-aa"].get("note") == note


def test_a_probe_whose_output_breaks_its_parser_is_that_probes_error(monkeypatch):
    def boom(text):
        raise ValueError("not enough values to unpack")
    monkeypatch.setattr(_gpu_probes, "parse_nvlink_status", boom)
    entry = _gpu_probes._one(lambda argv, timeout: (0, "GPU 0: x (UUID: GPU-aa)\n", ""), "nvidia-smi", "nvlink_status", 5)
    assert entry["state"] == "error" and "gpus" not in entry
    assert entry["message"] == "nvidia-smi nvlink -s: output not understood (ValueError: not enough values to unpack)"


def test_hostile_numbers_in_nvlink_output_do_not_raise():
    """int() of a 5000-digit field raises ValueError (Python 3.11's limit): numbers are bounded before int()."""
    huge = "9" * 5000
    gpus = _gpu_probes.parse_nvlink_status("GPU %s: x (UUID: GPU-aa)\nGPU 0: x (UUID: GPU-bb)\n  Link %s: 1 GB/s\n" % (huge, huge))
    assert list(gpus) == ["GPU-bb"] and gpus["GPU-bb"]["state"] == "unreadable"
    errors = _gpu_probes.parse_nvlink_errors("GPU 0: x (UUID: GPU-aa)\n  Link 1: CRC Errors: %s\n" % huge)
    assert errors["GPU-aa"][1]["crc"] > 0


@pytest.mark.parametrize("text, counters", [
    ("         Link 3: Replay Errors: 0\n         Link 3: Recovery Errors: 2\n         Link 3: CRC Errors: 5\n",
     {"replay": 0, "recovery": 2, "crc": 5}),
    ("         Link 3: Replay Errors: 1, Recovery Errors: 0, CRC Errors: N/A\n", {"replay": 1, "recovery": 0}),
])
def test_nvlink_error_counters_one_or_several_per_line(text, counters):
    gpus = _gpu_probes.parse_nvlink_errors("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aa)\n" + text)
    assert gpus == {"GPU-aa": {3: counters}}


@pytest.mark.parametrize("scenario, bus, expected", [
    ("h100_x2_nvswitch", "00000000:2A:00.0", dict(fabric_state="Completed", fabric_status="Success", reset_required=False,
                                                  drain_and_reset_recommended=False, recovery_action=None, serial="1654123038646")),
    # r570: the reset flags are 'deprecated' (None), the recovery action replaces them; a PCIe board's fabric is N/A.
    ("rtx5090_570", "00000000:02:00.0", dict(fabric_state=None, fabric_status=None, reset_required=None,
                                             drain_and_reset_recommended=None, recovery_action="None", serial="0")),
    ("b200_fabric_in_progress", "00000000:18:00.0", dict(fabric_state="In Progress", fabric_status=None,
                                                         fabric_health_summary=None, recovery_action="None")),
])
def test_query_sections_of_real_captures(scenario, bus, expected):
    gpus = _gpu_probes.parse_query(read(scenario, "q.txt"))
    summary = _gpu_probes.query_summary(gpus[bus])
    for key, value in expected.items():
        assert summary[key] == value, (key, summary)


def test_query_keeps_nested_paths_apart():
    items = _gpu_probes.parse_query(read("rtx5090_570", "q.txt"))["00000000:02:00.0"]
    assert items["PCI/GPU Link Info/PCIe Generation/Max"] == "5"
    assert items["PCI/GPU Link Info/PCIe Generation/Current"] == "1"
    assert items["MIG Mode/Current"] is None and items["Fabric/Health/Bandwidth"] is None


@pytest.mark.parametrize("raw, normal", [("00000000:18:00.0", "00000000:18:00.0"), ("0000:3b:00.0", "00000000:3B:00.0")])
def test_bus_ids_compare_across_formats(raw, normal):
    assert _gpu_probes.normal_bus_id(raw) == normal


@pytest.fixture
def stub(tmp_path, nvidia_smi_dir):
    calls = []

    def collect(scenario, extra=None, **kwargs):
        calls.append(scenario)
        data = tmp_path / ("%s-%d" % (scenario, len(calls)))
        shutil.copytree(os.path.join(FIXTURES, scenario), str(data))
        for name, text in (extra or {}).items():
            (data / name).write_text(text)
        env = dict(os.environ, GPUFLEET_STUB_DIR=str(data))
        return _gpus.collect_gpus(lambda argv, timeout: run_with_timeout(argv, timeout, env=env), timeout=10,
                                  search_paths=[nvidia_smi_dir], **kwargs)
    return collect


def test_no_probe_runs_unless_asked(stub):
    facts = stub("h100_x2_nvswitch")
    assert facts["probes"] == {} and "nvlink" not in facts["devices"][0] and "query" not in facts["devices"][0]


def test_probes_attach_per_gpu(stub):
    facts = stub("h100_x2_nvswitch", probes=ALL)
    assert sorted(facts["probes"]) == sorted(ALL) and all(p["state"] == "ok" for p in facts["probes"].values())
    dev = facts["devices"][1]
    assert len(dev["nvlink"]) == 18 and dev["nvlink_errors"][17] == {"replay": 0, "recovery": 0, "crc": 0}
    assert dev["query"]["fabric_state"] == "Completed" and dev["serial"] == "1654123038646"


def test_pcie_board_has_no_links(stub):
    facts = stub("rtx_pro_6000_x8", probes=ALL)
    assert all(dev["nvlink"] == {} for dev in facts["devices"])


def test_hung_probe_is_killed_within_its_timeout_and_named(stub):
    started = time.monotonic()
    facts = stub("h100_x2_nvswitch", extra={"sleep-q": "60"}, probes=ALL, probe_timeout=1.5, probe_budget=10)
    took = time.monotonic() - started
    assert took < 6, took
    assert facts["probes"]["query"]["state"] == "timeout"
    assert "nvidia-smi -q did not answer within 1.5s" in facts["probes"]["query"]["message"]
    assert facts["probes"]["nvlink_status"]["state"] == "ok"
    assert facts["devices"][0]["query"] is None and len(facts["devices"][0]["nvlink"]) == 18


def test_the_budget_caps_every_probe(stub):
    started = time.monotonic()
    facts = stub("h100_x2_nvswitch", extra={"sleep-nvlink": "60", "sleep-q": "60"}, probes=ALL, probe_timeout=30,
                 probe_budget=1)
    assert time.monotonic() - started < 6
    assert set(p["state"] for p in facts["probes"].values()) == {"timeout"}
    assert facts["devices"][0]["nvlink"] is None  # unknown, never "no links"


DCGMI = os.path.join(os.path.dirname(STUB), "dcgmi")


def test_dcgm_diag_table_of_a_real_run():
    tests = _gpu_probes.parse_dcgm_diag(read("dcgm", "diag-r1-pass.txt"))
    assert len(tests) == 9 and set(t["result"] for t in tests) == {"Pass"} and tests[0]["section"] == "Deployment"
    failed = [t for t in _gpu_probes.parse_dcgm_diag(read("dcgm", "diag-r1-persistence-fail.txt")) if t["result"] == "Fail"]
    assert [t["test"] for t in failed] == ["Persistence Mode"]
    assert "Persistence mode for GPU 0 is disabled" in failed[0]["detail"] and "-pm 1" in failed[0]["detail"]


@pytest.fixture
def dcgm_stub(stub, tmp_path):
    shutil.copy(DCGMI, str(tmp_path / "bin" / "dcgmi"))
    return stub


@pytest.mark.parametrize("text", ["+----- Deployment\n|: ||||\n", "+----- Deployment\n||\n|||\n", "|||\n"])
def test_dcgm_diag_row_of_bars_only_is_no_row(text):
    assert _gpu_probes.parse_dcgm_diag(text) == []


def test_dcgm_diag_runs_only_on_an_idle_node(dcgm_stub):
    facts = dcgm_stub("h100_x2_nvswitch", dcgm_diag_timeout=10)
    assert facts["probes"]["dcgm_diag"]["state"] == "ok" and len(facts["probes"]["dcgm_diag"]["tests"]) == 9
    app = "GPU-4039dfe4-0c97-4b1e-683e-eb7d42699053, 4425, python3, 80000\n"
    busy = dcgm_stub("h100_x2_nvswitch", extra={"compute-apps.csv": app}, dcgm_diag_timeout=10)
    assert busy["probes"]["dcgm_diag"]["state"] == "not_run"
    assert "1 process on the GPUs" in busy["probes"]["dcgm_diag"]["message"]


def test_dcgm_diag_without_hostengine_or_dcgmi(stub, dcgm_stub):
    down = dcgm_stub("b200_x8", dcgm_diag_timeout=10)["probes"]["dcgm_diag"]
    assert down["state"] == "error" and "is nv-hostengine running?" in down["message"]


def test_dcgm_absent_is_said(stub):
    facts = stub("h100_x2_nvswitch", dcgm_diag_timeout=10)
    assert facts["probes"]["dcgm_diag"]["state"] == "absent"


def test_hung_dcgm_diag_is_killed_within_its_timeout(dcgm_stub):
    started = time.monotonic()
    entry = dcgm_stub("h100_x2_nvswitch", extra={"sleep-dcgm": "60"}, dcgm_diag_timeout=1.5)["probes"]["dcgm_diag"]
    assert time.monotonic() - started < 6
    assert entry["state"] == "timeout" and "dcgmi diag -r 1 did not answer within 1.5s" in entry["message"]
