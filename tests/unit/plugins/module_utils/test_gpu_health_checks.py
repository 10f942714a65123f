# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu profile's node-health checks (issue 30), table-driven on facts collected from the captured fixtures:
0 false alarms on the healthy ones, the right check and words on each fault."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import shutil

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _gpu_probes, _gpus
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _gpu_build_checks as gb
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _gpu_health_checks as gh
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy_validation
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options as table
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _slurm
from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _health_check
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "gpus")
STUB = os.path.normpath(os.path.join(HERE, "..", "..", "..", "fleet", "stubs", "nvidia-smi"))
ALL = ("nvlink_status", "nvlink_errors", "query")
CHECKS = (gh.check_pcie_link, gh.check_gpu_temperature, gh.check_clock_events, gh.check_persistence_mode,
          gh.check_mig_mode, gh.check_nvlink, gh.check_fabric, gh.check_gpu_recovery, gh.check_dcgm_diag)
ON = dict(check_nvlink=True, check_fabric=True, check_gpu_recovery=True, check_dcgm_diag=True, min_pcie_gen=5,
          min_pcie_width=16)
_CACHE = {}


def collected(scenario, tmp_path_factory):
    if scenario not in _CACHE:
        bin_dir = tmp_path_factory.mktemp("bin")
        shutil.copy(STUB, str(bin_dir / "nvidia-smi"))
        os.chmod(str(bin_dir / "nvidia-smi"), 0o755)
        shutil.copy(os.path.join(os.path.dirname(STUB), "dcgmi"), str(bin_dir / "dcgmi"))
        stubs = tmp_path_factory.mktemp("gpus") / scenario   # a copy: dcgmi records its runs beside the files
        shutil.copytree(os.path.join(FIXTURES, scenario), str(stubs))
        env = dict(os.environ, GPUFLEET_STUB_DIR=str(stubs))
        _CACHE[scenario] = _gpus.collect_gpus(lambda argv, timeout: run_with_timeout(argv, timeout, env=env), timeout=10,
                                              search_paths=[str(bin_dir)], probes=ALL, dcgm_diag_timeout=10)
    return {"gpus": copy.deepcopy(_CACHE[scenario])}


def policy(**over):
    return _policy_validation.validate_policy(dict(table.defaults(), **dict(ON, **over)))


# (scenario, check -> status on it). Anything not listed must be ok.
HEALTHY = [
    # PCIe board / no probe files: no links, no fabric, no reset status shown -- not applicable, said so
    # (its compute-apps.csv lists processes: dcgmi diag is not run beside them)
    ("rtx_pro_6000_x8", {"nvlink": "skipped", "fabric": "skipped", "gpu_recovery": "skipped", "dcgm_diag": "skipped"}),
    # (18 links up: a B200 listed with no link is every link down, never a PCIe board)
    ("b200_x8", {"fabric": "skipped", "gpu_recovery": "skipped", "dcgm_diag": "unknown"}),
    ("h100_x2_nvswitch", {}),
    ("rtx5090_570", {"nvlink": "skipped", "fabric": "skipped", "mig_mode": "skipped", "dcgm_diag": "unknown"}),
]


@pytest.mark.parametrize("scenario, expected", HEALTHY)
def test_no_false_alarm_on_healthy_captures(scenario, expected, tmp_path_factory):
    facts = collected(scenario, tmp_path_factory)
    for check in CHECKS:
        entry = check(facts, policy())
        want = expected.get(entry["name"], "ok")
        assert entry["status"] == want, (scenario, entry)
        if want == "skipped":
            assert any(words in entry["message"] for words in ("not applicable", "MIG", "reports neither", "a diagnostic never runs beside work")), entry
        if want == "unknown":  # the stand-in dcgmi there answers as with nv-hostengine down: said, with the hint
            assert "is nv-hostengine running?" in entry["message"], entry


def _dev(index, **over):
    def change(facts):
        facts["gpus"]["devices"][index].update(over)
    return change


def _link_down(facts):
    facts["gpus"]["devices"][1]["nvlink"][7] = None


def _link_errors(facts):
    facts["gpus"]["devices"][0]["nvlink_errors"][3]["crc"] = 12


def _query(index, **over):
    def change(facts):
        facts["gpus"]["devices"][index]["query"].update(over)
    return change


def _timeout(probe):
    def change(facts):
        facts["gpus"]["probes"][probe].update(state="timeout", message="nvidia-smi -q did not answer within 5.0s and was killed")
    return change


FAULTS = [
    ("h100_x2_nvswitch", _dev(1, utilization_gpu=87, clock_event_reasons=[], pcie_gen_current=3), {}, gh.check_pcie_link,
     "failed", "GPU 1 (00000000:2A:00.0, NVIDIA H100 80GB HBM3, serial 1654123038646, GPU-dd3b269a"),
    ("h100_x2_nvswitch", _dev(1, utilization_gpu=87, clock_event_reasons=[], pcie_width_current=8), {}, gh.check_pcie_link,
     "failed", "runs at x8 under load, below its max x16"),
    # Idle GPU at gen 1 (the 5090 capture): not judged. The same link under load is.
    ("rtx5090_570", _dev(0, utilization_gpu=0), {}, gh.check_pcie_link, "ok", ""),
    ("rtx5090_570", _dev(0, utilization_gpu=95), {}, gh.check_pcie_link, "failed", "runs at gen 1 under load"),
    ("b200_x8", _dev(4, pcie_gen_max=4), {}, gh.check_pcie_link, "failed", "can reach only PCIe gen 4, gen 5 expected"),
    ("b200_x8", _dev(2, temperature=91), {}, gh.check_gpu_temperature, "failed", "is at 91 C"),
    ("b200_x8", _dev(2, clock_event_reasons=["hw_slowdown", "hw_power_brake_slowdown"]), {}, gh.check_clock_events,
     "failed", "slowed by hw_power_brake_slowdown, hw_slowdown"),
    ("b200_x8", _dev(2, clock_event_reasons=["sw_power_cap", "applications_clocks_setting"]), {}, gh.check_clock_events, "ok", ""),
    ("b200_x8", _dev(6, persistence_mode=False), {}, gh.check_persistence_mode, "failed", "nvidia-persistenced"),
    ("b200_x8", _dev(6, persistence_mode=False), {"require_persistence_mode": False}, gh.check_persistence_mode, None, ""),
    ("b200_x8", _dev(3, mig_mode="enabled"), {}, gh.check_mig_mode, "failed", "-mig 0"),
    ("b200_x8", _dev(3, mig_mode="enabled"), {"mig_mode": "any"}, gh.check_mig_mode, None, ""),
    ("h100_x2_nvswitch", _link_down, {}, gh.check_nvlink, "failed", "has NVLink link 7 down"),
    ("h100_x2_nvswitch", _link_errors, {}, gh.check_nvlink, "failed", "link 3 (12)"),
    ("h100_x2_nvswitch", _link_errors, {"max_nvlink_errors": 20}, gh.check_nvlink, "ok", ""),
    ("b200_fabric_in_progress", lambda facts: None, {}, gh.check_fabric, "failed", "has fabric state In Progress"),
    ("h100_x2_nvswitch", _query(0, fabric_status="Failure"), {}, gh.check_fabric, "failed", "status Failure"),
    ("h100_x2_nvswitch", _query(0, fabric_health_summary="Unhealthy"), {}, gh.check_fabric, "failed", "fabric health Unhealthy"),
    ("h100_x2_nvswitch", _query(1, reset_required=True), {}, gh.check_gpu_recovery, "failed", "says reset required"),
    ("rtx5090_570", _query(0, recovery_action="Reboot"), {}, gh.check_gpu_recovery, "failed", "recovery action Reboot"),
    ("h100_x2_nvswitch", lambda facts: facts["gpus"]["probes"]["dcgm_diag"]["tests"][4].update(
        result="Fail", detail="Persistence mode for GPU 0 is disabled."), {}, gh.check_dcgm_diag, "failed",
     "Persistence Mode failed: Persistence mode for GPU 0 is disabled."),
    ("h100_x2_nvswitch", lambda facts: facts["gpus"]["probes"]["dcgm_diag"].update(state="not_run", message="dcgmi diag -r 1 "
     "not run: 1 process on the GPUs"), {}, gh.check_dcgm_diag, "skipped", "1 process on the GPUs"),
    # A hung probe: named, not counted against the node -- unless the policy says so.
    ("h100_x2_nvswitch", _timeout("query"), {}, gh.check_fabric, "skipped", "unknown, not counted against the node: nvidia-smi -q"),
    ("h100_x2_nvswitch", _timeout("query"), {"gpu_probe_timeout_fails": True}, gh.check_gpu_recovery, "unknown", "nvidia-smi -q"),
]


@pytest.mark.parametrize("scenario, change, over, check, status, words", FAULTS)
def test_each_fault_is_flagged_by_its_check(scenario, change, over, check, status, words, tmp_path_factory):
    facts = collected(scenario, tmp_path_factory)
    change(facts)
    entry = check(facts, policy(**over))
    if status is None:
        assert entry is None
        return
    assert entry["status"] == status, entry
    assert words in entry["message"], entry["message"]


@pytest.mark.parametrize("scenario, change, over, check, words", [row[:4] + row[5:] for row in FAULTS if row[4] == "failed"])
def test_each_fault_fits_the_slurm_reason_and_the_npd_line(scenario, change, over, check, words, tmp_path_factory):
    """What slurmd and node-problem-detector show says which GPU (by bus id) and what is wrong, never cut inside the
    GPU's identity (it was, for every GPU check: name, serial and UUID filled the 120 characters)."""
    facts = collected(scenario, tmp_path_factory)
    change(facts)
    entry = check(facts, policy(**over))
    reason = _slurm.drain_reason("gpufleet:", [entry])
    assert reason.startswith("gpufleet: %s: " % entry["name"]) and not reason.endswith("..."), reason
    fault = _slurm.cause(entry["message"])
    assert "serial" not in fault and "GPU-" not in fault and len(fault) > 15, fault
    line = _health_check.first_line(False, [entry], "")
    assert line.startswith("not ready: %s: " % entry["name"]) and len(line) <= 80, line
    assert line[len("not ready: %s: " % entry["name"]):][:40].rstrip(".") in reason, (line, reason)


def test_probe_checks_are_off_by_default_so_no_probe_runs():
    defaults = _policy_validation.validate_policy(table.defaults())
    assert _policy.gpu_probes_for(defaults) == []
    assert _policy.gpu_probes_for(policy()) == ["nvlink_status", "nvlink_errors", "query", "dcgm_diag"]
    assert _policy.node_facts_args(policy())["gpu_probe_budget"] == 15


def test_xid_by_class(tmp_path_factory):
    def events(*codes):
        return {"readable": True, "window_seconds": 3600, "oom_kills": [], "xids": [
            {"code": code, "pci": "0000:18:00", "age_seconds": 60, "message": "x", "fatal": False} for code in codes]}
    facts = collected("b200_x8", tmp_path_factory)
    facts["kernel_events"] = events(79)
    entry = gb.check_fatal_xid(facts, policy())
    assert entry["status"] == "failed" and "GPU has fallen off the bus" in entry["message"]
    assert "GPU 0 (00000000:18:00.0, NVIDIA B200, serial 1654125010001" in entry["message"]
    assert "reboot the node" in entry["message"]
    facts["kernel_events"] = events(43, 13, 31)
    assert gb.check_fatal_xid(facts, policy())["status"] == "ok"          # application errors
    assert gb.check_fatal_xid(facts, policy(xid_fail_actions=["restart_app"]))["status"] == "failed"
    facts["kernel_events"] = events(149)                                   # not in the old flat list, reset class
    assert gb.check_fatal_xid(facts, policy())["status"] == "failed"
    assert gb.check_fatal_xid(facts, policy(xid_fail_actions=[], fatal_xids=[]))["status"] == "ok"


# -- NVLink read as the probe printed it (issue 36 finding 3) ------------------------------------------------------
H100 = ("GPU-4039dfe4-0c97-4b1e-683e-eb7d42699053", "GPU-dd3b269a-8f3a-d2d5-1518-2713ba03fcf7")
INACTIVE = "\t NVML: Unable to retrieve NVLink information as all links are inActive\n"


def _gpu_line(index, uuid, name="NVIDIA H100 80GB HBM3"):
    return "GPU %d: %s (UUID: %s)\n" % (index, name, uuid)


def _links(count=18):
    return "".join("\t Link %d: 26.562 GB/s\n" % link for link in range(count))


def _probed(facts, status_text, errors_text=None):
    """The facts as attach_probes leaves them after ``nvlink -s`` printed ``status_text`` (and ``-e`` ``errors_text``,
    by default every GPU with no counters)."""
    if errors_text is None:
        errors_text = "".join(_gpu_line(i, dev["uuid"], dev["name"]) for i, dev in enumerate(facts["gpus"]["devices"]))
    results = dict((name, dict(facts["gpus"]["probes"][name], gpus=parse(text))) for name, parse, text in (
        ("nvlink_status", _gpu_probes.parse_nvlink_status, status_text),
        ("nvlink_errors", _gpu_probes.parse_nvlink_errors, errors_text)))
    _gpus.attach_probes(facts["gpus"], dict(facts["gpus"]["probes"], **results))
    return facts


@pytest.mark.parametrize("status_text, status, words", [
    # every link of one GPU down: the driver prints no link at all, only NVML's sentence
    (_gpu_line(0, H100[0]) + _links() + _gpu_line(1, H100[1]) + INACTIVE, "failed", "GPU 1 (00000000:2A:00.0"),
    # ... and of both: was "a PCIe board, not applicable"
    (_gpu_line(0, H100[0]) + INACTIVE + _gpu_line(1, H100[1]) + INACTIVE, "failed", "has every NVLink link down"),
    # the probe's own error under each GPU: unknown, never "no NVLink"
    (_gpu_line(0, H100[0]) + "\t [Unknown Error]\n" + _gpu_line(1, H100[1]) + "\t [Unknown Error]\n", "unknown",
     "'[Unknown Error]'"),
    # a GPU the probe did not list at all: unknown (was "no links", or "not applicable" when none was listed)
    (_gpu_line(0, H100[0]) + _links(), "unknown", "GPU 1 (00000000:2A:00.0, NVIDIA H100 80GB HBM3, serial"),
    ("[Unknown Error]\n", "unknown", "is not listed by `nvidia-smi nvlink -s`"),
    # an H100 SXM listed alone (as a PCIe board prints): it has 18 links, so they are down
    (_gpu_line(0, H100[0]) + _gpu_line(1, H100[1]), "failed", "lists no NVLink link, and a NVIDIA H100 80GB HBM3 has 18"),
    # fewer links than the model has, on every GPU alike (peers alone could not tell)
    (_gpu_line(0, H100[0]) + _links(12) + _gpu_line(1, H100[1]) + _links(12), "failed", "has NVLink 6 links down"),
])
def test_nvlink_reads_what_the_probe_printed(status_text, status, words, tmp_path_factory):
    facts = _probed(collected("h100_x2_nvswitch", tmp_path_factory), status_text)
    entry = gh.check_nvlink(facts, policy())
    assert entry["status"] == status, entry
    assert words in entry["message"], entry["message"]


def test_gpu_missing_from_the_error_counters_is_unknown_not_zero(tmp_path_factory):
    facts = collected("h100_x2_nvswitch", tmp_path_factory)
    facts = _probed(facts, _gpu_line(0, H100[0]) + _links() + _gpu_line(1, H100[1]) + _links(),
                    errors_text=_gpu_line(0, H100[0]) + "\t Link 0: CRC Errors: 0\n")
    entry = gh.check_nvlink(facts, policy())
    assert entry["status"] == "unknown" and "not listed by `nvidia-smi nvlink -e`" in entry["message"], entry


def test_a_pcie_board_listed_alone_is_still_not_applicable(tmp_path_factory):
    entry = gh.check_nvlink(collected("rtx_pro_6000_x8", tmp_path_factory), policy())
    assert entry["status"] == "skipped" and "not applicable" in entry["message"], entry


@pytest.mark.parametrize("name, expected", [
    ("NVIDIA H100 80GB HBM3", (True, 18)), ("NVIDIA H100 PCIe", (False, None)), ("NVIDIA A100-SXM4-80GB", (True, 12)),
    ("NVIDIA A100-PCIE-40GB", (False, None)), ("NVIDIA B200", (True, 18)), ("NVIDIA GB200", (True, 18)),
    ("NVIDIA H200 NVL", (False, None)), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", (False, None)), (None, (False, None)),
])
def test_nvlink_model(name, expected):
    assert gh.nvlink_model(name) == expected
