# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpus: parsers on fixture CSV, and collect_gpus against a stub nvidia-smi run as a real process."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _gpus
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "gpus")
MIB = 2 ** 20
NEW_FIELDS = ["serial", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max", "utilization.gpu", "mig.mode.current"]


def fixture_rows(scenario):
    """(fields, csv text) of a scenario's query-gpu.csv, as the stub would print them."""
    with open(os.path.join(FIXTURES, scenario, "query-gpu.csv")) as handle:
        header, body = handle.read().split("\n", 1)
    return header.replace("#fields: ", "").split(","), body


@pytest.fixture
def stub_bin(nvidia_smi_dir, gpu_scenario):
    """The stub nvidia-smi's directory (conftest) and a run factory for one of its scenarios."""

    def runner(scenario, pidfile=None, calls=None):
        env = dict(os.environ, GPUFLEET_STUB_DIR=gpu_scenario(scenario))
        if pidfile:
            env["GPUFLEET_STUB_PIDFILE"] = pidfile

        def run(argv, timeout):
            if calls is not None:
                calls.append(list(argv))
            return run_with_timeout(argv, timeout, env=env)
        return run
    return nvidia_smi_dir, runner


@pytest.mark.parametrize("text, expected", [
    ("[N/A]", None), ("[Not Supported]", None), ("N/A", None), ("  ", None), (" 580.65.06 ", "580.65.06"),
])
def test_parse_value_maps_missing_markers_to_none(text, expected):
    assert _gpus.parse_value(text) == expected


@pytest.mark.parametrize("raw, names", [
    ("0x0000000000000000", []),
    ("0x0000000000000001", ["gpu_idle"]),
    ("0x0000000000000005", ["gpu_idle", "sw_power_cap"]),
    ("0x00000000000000C8", ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"]),
    ("0x0000000000001000", ["bit_0x1000"]),
    ("[N/A]", None),
])
def test_decode_clock_event_reasons(raw, names):
    decoded, raw_back = _gpus.decode_clock_event_reasons(raw)
    assert decoded == names
    assert raw_back == (None if names is None else raw)


@pytest.mark.parametrize("scenario, count, name, cc, total_mib, driver", [
    ("rtx_pro_6000_x8", 8, "NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", 97887, "580.65.06"),
    ("b200_x8", 8, "NVIDIA B200", "10.0", 183359, "570.133.20"),
    ("geforce_na", 1, "NVIDIA GeForce RTX 5090", "12.0", 32607, "575.64.03"),
    ("a100_pre535", 2, "NVIDIA A100-SXM4-80GB", "8.0", 81920, "525.147.05"),
])
def test_parse_query_gpu_fixture(scenario, count, name, cc, total_mib, driver):
    fields, body = fixture_rows(scenario)
    devices = _gpus.parse_query_gpu(body, fields)
    assert len(devices) == count
    assert [dev["index"] for dev in devices] == list(range(count))
    assert devices[0]["name"] == name
    assert devices[0]["compute_capability"] == cc
    assert isinstance(devices[0]["compute_capability"], str)
    assert devices[0]["memory_total_bytes"] == total_mib * MIB
    assert devices[0]["driver_version"] == driver


def test_na_and_not_supported_become_null():
    fields, body = fixture_rows("geforce_na")
    dev = _gpus.parse_query_gpu(body, fields)[0]
    assert dev["power_draw_watts"] is None
    assert dev["ecc_uncorrected"] is None
    assert dev["remapped_rows_pending"] is None and dev["remapped_rows_failure"] is None
    assert dev["persistence_mode"] is False
    assert dev["memory_used_bytes"] == 1536 * MIB


def test_b200_faults_are_visible():
    fields, body = fixture_rows("b200_x8")
    devices = _gpus.parse_query_gpu(body, fields)
    assert devices[5]["ecc_uncorrected"] == 2 and devices[5]["remapped_rows_pending"] is True
    assert devices[2]["clock_event_reasons"] == ["sw_power_cap"]


def test_short_row_is_an_error_not_a_silent_device():
    with pytest.raises(ValueError, match="expected 3 columns"):
        _gpus.parse_query_gpu("0, NVIDIA B200\n", ["index", "name", "uuid"])


@pytest.mark.parametrize("text, expected", [
    ("GPU-a, 4425, python3, 81234\nGPU-a, 9, /usr/bin/python3, 20\nGPU-b, 7, [Not Found], [N/A]\n",
     {"GPU-a": [{"pid": 4425, "name": "python3", "used_memory_bytes": 81234 * MIB},
                {"pid": 9, "name": "/usr/bin/python3", "used_memory_bytes": 20 * MIB}],
      "GPU-b": [{"pid": 7, "name": "[Not Found]", "used_memory_bytes": None}]}),
    ("", {}),
    ("No running processes found\n", {}),
])
def test_parse_compute_apps(text, expected):
    assert _gpus.parse_compute_apps(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("| NVIDIA-SMI 575.64.03   Driver Version: 575.64.03   CUDA Version: 12.9     |", "12.9"),
    ("NVIDIA-SMI version  : 580.65.06\nDRIVER version      : 580.65.06\nCUDA Version        : 13.0\n", "13.0"),
    ("Invalid combination of input arguments.", None),
])
def test_parse_cuda_version(text, expected):
    assert _gpus.parse_cuda_version(text) == expected


@pytest.mark.parametrize("text, field", [
    ('Field "clocks_event_reasons.active" is not a valid field to query.\n\n', "clocks_event_reasons.active"),
    ('Field "compute_cap" is not a valid field to query.', "compute_cap"),
    ("NVIDIA-SMI has failed", None),
])
def test_invalid_field(text, field):
    assert _gpus.invalid_field(text) == field


# ---- collect_gpus against the stub, real processes -------------------------------------------------------

def test_collect_blackwell_x8(stub_bin):
    bin_dir, runner = stub_bin
    facts = _gpus.collect_gpus(runner("rtx_pro_6000_x8"), timeout=10, search_paths=[bin_dir])
    assert facts["present"] is True and facts["state"] == "ok"
    assert facts["count"] == 8
    assert facts["driver_version"] == "580.65.06"
    assert facts["cuda_version"] == "13.0"
    assert facts["unsupported_fields"] == []
    assert facts["nvidia_smi"] == os.path.join(bin_dir, "nvidia-smi")
    assert {dev["compute_capability"] for dev in facts["devices"]} == {"12.0"}
    busy = [dev for dev in facts["devices"] if dev["compute_apps"]]
    assert [dev["index"] for dev in busy] == [3]
    assert busy[0]["compute_apps"] == [{"pid": 4425, "name": "python3", "used_memory_bytes": 81234 * MIB}]
    assert busy[0]["memory_used_bytes"] == 82264 * MIB


def test_pre535_driver_falls_back_to_throttle_reasons(stub_bin):
    bin_dir, runner = stub_bin
    calls = []
    facts = _gpus.collect_gpus(runner("a100_pre535", calls=calls), timeout=10, search_paths=[bin_dir])
    assert facts["state"] == "ok" and facts["count"] == 2
    # An old driver knows none of issue 30's fields either: each is dropped in turn, the device query still answers.
    assert facts["unsupported_fields"] == ["clocks_event_reasons.active"] + NEW_FIELDS
    assert facts["devices"][0]["clock_event_reasons"] == ["sw_thermal_slowdown"]
    assert facts["devices"][0]["pcie_gen_max"] is None and facts["devices"][0]["mig_mode"] is None
    assert "clocks_throttle_reasons.active" in calls[1][1]
    # No --version on this driver: the CUDA version came from the plain table's header.
    assert facts["cuda_version"] == "12.0"


def test_rejected_fields_degrade_instead_of_returning_nothing(stub_bin):
    bin_dir, runner = stub_bin
    facts = _gpus.collect_gpus(runner("v100_r470"), timeout=10, search_paths=[bin_dir])
    assert facts["state"] == "ok" and facts["present"] is True
    assert facts["unsupported_fields"] == ["compute_cap", "remapped_rows.pending", "remapped_rows.failure",
                                           "clocks_event_reasons.active"] + NEW_FIELDS
    dev = facts["devices"][0]
    assert dev["name"] == "Tesla V100-SXM2-32GB" and dev["memory_total_bytes"] == 32510 * MIB
    assert dev["compute_capability"] is None and dev["remapped_rows_pending"] is None
    assert dev["clock_event_reasons"] == ["gpu_idle"]
    assert facts["cuda_version"] is None


@pytest.mark.parametrize("scenario, state, words", [
    ("exit_9", "driver_not_loaded", "couldn't communicate with the NVIDIA driver"),
    ("exit_12", "nvml_missing", "libnvidia-ml.so"),
    ("exit_14", "inforom_corrupt", "infoROM is corrupted"),
    ("exit_15", "gpu_lost", "fallen off the bus"),
])
def test_exit_codes_become_named_states(stub_bin, scenario, state, words):
    bin_dir, runner = stub_bin
    facts = _gpus.collect_gpus(runner(scenario), timeout=10, search_paths=[bin_dir])
    assert facts["present"] is False and facts["state"] == state
    assert words in facts["message"]
    assert facts["devices"] == [] and facts["count"] == 0


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with open("/proc/%d/stat" % pid) as handle:
        return handle.read().split(") ")[-1].split()[0] != "Z"


def test_hung_nvidia_smi_is_killed_with_its_children(stub_bin, tmp_path):
    bin_dir, runner = stub_bin
    pidfile = str(tmp_path / "pids")
    started = time.time()
    facts = _gpus.collect_gpus(runner("hang", pidfile=pidfile), timeout=1.5, search_paths=[bin_dir])
    elapsed = time.time() - started
    assert facts["state"] == "timeout" and facts["present"] is False
    assert "1.5s" in facts["message"]
    assert elapsed < 6, elapsed
    pids = [int(pid) for pid in open(pidfile).read().split()]
    assert len(pids) == 2
    deadline = time.time() + 3
    while any(_alive(pid) for pid in pids) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids), "the stub or its sleep child survived the timeout"


def test_no_nvidia_smi_is_a_fact(tmp_path):
    facts = _gpus.collect_gpus(run_with_timeout, timeout=5, search_paths=[str(tmp_path)])
    assert facts["present"] is False and facts["state"] == "not_found"
    assert facts["message"].startswith("nvidia-smi not found in %s" % tmp_path)
    assert facts["nvidia_smi"] is None


def test_failed_compute_apps_query_is_unknown_not_empty(stub_bin, tmp_path):
    bin_dir, _runner = stub_bin
    scenario = tmp_path / "apps_fail"
    shutil.copytree(os.path.join(FIXTURES, "rtx_pro_6000_x8"), str(scenario))
    # A driver that lists GPUs but fails the compute-apps query.
    (scenario / "compute-apps-exit-code").write_text(u"3\n")
    env = dict(os.environ, GPUFLEET_STUB_DIR=str(scenario))

    def run(argv, timeout):
        return run_with_timeout(argv, timeout, env=env)
    facts = _gpus.collect_gpus(run, timeout=10, search_paths=[bin_dir])
    assert facts["count"] == 8
    assert all(dev["compute_apps"] is None for dev in facts["devices"])
    assert "compute apps unknown" in facts["message"]


@pytest.mark.parametrize("text, kind", [("1" * 400, int), ("9" * 400 + " MiB", int), ("-" + "9" * 400, int),
                                        ("1" * 400 + ".5", float), ("1" * 5000, int)])
def test_a_number_past_any_field_is_unknown_not_an_overflow(text, kind):
    """int(float('1' * 400)) raised OverflowError out of collect_gpus: the health check ended 1 with no metrics."""
    assert _gpus._number(text, kind) is None


def test_bounded_numbers_keep_their_value():
    assert _gpus._number("97887 MiB") == 97887 and _gpus._number("24.12 W", float) == 24.12 and _gpus._number("-3") == -3


def test_a_400_digit_field_costs_that_field_only(tmp_path):
    fields = [field for field, _key in _gpus.QUERY_FIELDS]
    cells = ["N/A"] * len(fields)
    cells[fields.index("index")] = "0"
    cells[fields.index("uuid")] = "GPU-aa"
    cells[fields.index("memory.total")] = "1" * 400
    cells[fields.index("temperature.gpu")] = "41"
    smi = tmp_path / "nvidia-smi"
    smi.write_text(u"#!/bin/sh\n")
    os.chmod(str(smi), 0o755)

    def run(argv, timeout):
        return 0, (", ".join(cells) + "\n") if any(a.startswith("--query-gpu=") for a in argv) else "", ""
    facts = _gpus.collect_gpus(run=run, search_paths=[str(tmp_path)])
    dev = facts["devices"][0]
    assert facts["state"] == "ok" and dev["memory_total_bytes"] is None and dev["temperature"] == 41
