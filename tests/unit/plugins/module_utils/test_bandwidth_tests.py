# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bandwidth active tests (issue 37 item 2): nvbandwidth's and all_reduce_perf's output parsed, judged against the
floors published for the GPU model or given, and runs of the stand-in programs: never beside work, never past the
budget, the numbers kept even where there is no verdict."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _bandwidth_tests as bw
from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _dcgm_deep
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "gpus", "bandwidth")
STUBS = os.path.normpath(os.path.join(HERE, "..", "..", "..", "fleet", "stubs"))
H100 = "NVIDIA H100 80GB HBM3"
NOW = 1764900000.0


def read(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def gpus(count, name=H100, nvlink=True, apps=()):
    links = {"0": 26.562, "1": 26.562} if nvlink else {}
    return {"state": "ok", "devices": [dict(index=i, name=name, uuid="GPU-%d" % i, nvlink=links, compute_apps=list(apps))
                                       for i in range(count)]}


def test_nvbandwidth_matrices_parse_with_the_diagonal_unknown():
    cases = bw.parse_nvbandwidth(read("nvbandwidth-h100-x8.txt"))
    assert sorted(cases) == sorted([bw.H2D, bw.D2H, bw.P2P])
    assert cases[bw.H2D]["rows"] == [[55.37, 55.36, 55.37, 55.36, 55.36, 55.36, 55.36, 55.33]]
    assert cases[bw.H2D]["sum"] == pytest.approx(442.87)
    assert len(cases[bw.P2P]["rows"]) == 8 and cases[bw.P2P]["rows"][2][2] is None and cases[bw.P2P]["rows"][2][3] > 376
    with pytest.raises(ValueError, match="no testcase ran"):
        bw.parse_nvbandwidth("CUDA error: no CUDA-capable device is detected\n")


def test_all_reduce_rows_take_the_lower_of_out_of_place_and_in_place():
    parsed = bw.parse_all_reduce(read("all-reduce-h100-x8.txt"))
    assert parsed["rows"] == [{"bytes": 17179869184, "busbw": 477.31, "wrong": 0}]
    assert parsed["avg_busbw"] == pytest.approx(477.61) and parsed["out_of_bounds"] == 0
    mpi = "\n".join("[1,0]<stdout>:" + line for line in read("all-reduce-h100-x8.txt").splitlines())
    assert bw.parse_all_reduce(mpi) == parsed   # run under mpirun, each line prefixed
    with pytest.raises(ValueError, match="no message size"):
        bw.parse_all_reduce("# nccl-tests version 2.17.6\n# Out of bounds values : 0 OK\n")


@pytest.mark.parametrize("name, given, floors, source", [
    (H100, {}, dict(host=48.0, peer=335.0, bus=460.0), "nd96isr_h100_v5.conf"),
    ("NVIDIA H200", {}, dict(host=48.0, peer=335.0, bus=431.0), "nd96isr_h200_v5.conf"),
    ("NVIDIA GB200", {}, dict(host=48.0, peer=335.0, bus=432.0), "nd128isr_ndr_gb200_v6.conf"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", {}, {}, None),                     # nothing published: no verdict
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", dict(host=50), dict(host=50.0), "the options (min_host_bandwidth)"),
    (H100, dict(bus=400, host=None), dict(host=48.0, peer=335.0, bus=400.0), "min_bus_bandwidth); the rest from Azure"),
])
def test_floors_come_from_the_options_over_the_published_figures(name, given, floors, source):
    found, where = bw.floors_for(name, given)
    assert found == floors
    assert (where is None) if source is None else (source in where), where


@pytest.mark.parametrize("fixture, failures", [
    ("nvbandwidth-h100-x8.txt", []),
    ("nvbandwidth-h100-x8-gpu3-gen4-link.txt", ["host to GPU 3: 26.0 GB/s, under 48", "GPU 3 to host: 26.0 GB/s, under 48",
                                                "GPU 5 to GPU 6: 212.4 GB/s, under 335"]),
])
def test_nvbandwidth_names_each_gpu_and_pair_under_its_floor(fixture, failures):
    assert bw.judge_nvbandwidth(bw.parse_nvbandwidth(read(fixture)), dict(host=48.0, peer=335.0, bus=460.0)) == failures


@pytest.mark.parametrize("fixture, failures", [
    ("all-reduce-h100-x8.txt", []),
    ("all-reduce-h100-x8-one-link-down.txt", ["bus bandwidth 253.4 GB/s at 16384 MiB, under 460"]),
    ("all-reduce-h100-x8-wrong-data.txt", ["all_reduce returned wrong data (3 values out of bounds)"]),
])
def test_all_reduce_is_judged_by_its_bus_bandwidth_and_its_data(fixture, failures):
    assert bw.judge_all_reduce(bw.parse_all_reduce(read(fixture)), dict(bus=460.0)) == failures


def test_the_commands_are_what_the_published_figures_measure():
    assert bw.command("nvbandwidth", "/x/nvbandwidth", 8, True) == ["/x/nvbandwidth", "-t", bw.H2D, bw.D2H, bw.P2P]
    assert bw.command("nvbandwidth", "/x/nvbandwidth", 8, False) == ["/x/nvbandwidth", "-t", bw.H2D, bw.D2H]
    assert bw.command("nccl_all_reduce", "/x/all_reduce_perf", 8, True) == ["/x/all_reduce_perf", "-b", "16G", "-e", "16G", "-g", "8"]


@pytest.fixture
def node(tmp_path):
    """The stand-ins copied beside a folder of replay files, run as processes, and a place to keep results."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name in ("nvbandwidth", "all_reduce_perf"):
        shutil.copy(os.path.join(STUBS, name), str(tmp_path / name))

    def run(argv, timeout):
        return run_with_timeout(argv, timeout, env=dict(os.environ, GPUFLEET_STUB_DIR=str(stubs)))

    def active(test, facts, executable="stand-in", **params):
        options = dict(test=test, budget=30, valid_hours=12, admission_state_dirs=[],
                       result_path=str(tmp_path / "state" / ("%s.json" % test)))
        options.update(params)
        if executable == "stand-in":
            executable = str(tmp_path / ("nvbandwidth" if test == "nvbandwidth" else "all_reduce_perf"))
        return _dcgm_deep.run_active_test(run, facts, executable, options, now=lambda: NOW)
    return {"dir": stubs, "tmp": tmp_path, "active": active}


def ran(node):
    log = node["dir"] / "bandwidth-runs.log"
    return log.read_text().splitlines() if log.exists() else []


def kept(node, test):
    with open(str(node["tmp"] / "state" / ("%s.json" % test))) as handle:
        return json.load(handle)


def test_an_idle_h100_node_passes_nvbandwidth_against_the_published_floors(node):
    (node["dir"] / "nvbandwidth.txt").write_text(read("nvbandwidth-h100-x8.txt"))
    entry = node["active"]("nvbandwidth", gpus(8))
    assert entry["state"] == "ok" and entry["message"] == "", entry
    assert ran(node) == ["nvbandwidth -t %s %s %s" % (bw.H2D, bw.D2H, bw.P2P)]   # NVLinked: the peer reads too
    record = kept(node, "nvbandwidth")
    assert record["passed"] and record["judged"] and "nd96isr_h100_v5.conf" in record["floors_source"]
    assert record["measured"]["host_to_gpu"][3] == 55.36 and record["measured"]["lowest_peer"] == 376.5
    assert record["verified_at"] == NOW and record["valid_until"] == NOW + 12 * 3600


def test_a_slow_link_fails_and_names_the_gpu_and_the_pair(node):
    (node["dir"] / "nvbandwidth.txt").write_text(read("nvbandwidth-h100-x8-gpu3-gen4-link.txt"))
    entry = node["active"]("nvbandwidth", gpus(8))
    record = kept(node, "nvbandwidth")
    assert entry["state"] == "ok" and not record["passed"]
    assert record["failures"] == ["host to GPU 3: 26.0 GB/s, under 48", "GPU 3 to host: 26.0 GB/s, under 48",
                                  "GPU 5 to GPU 6: 212.4 GB/s, under 335"]


def test_a_board_with_no_published_figure_keeps_its_numbers_without_a_verdict(node):
    (node["dir"] / "nvbandwidth.txt").write_text(read("nvbandwidth-rtx-pro-6000-x2.txt"))
    pro = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    entry = node["active"]("nvbandwidth", gpus(2, name=pro, nvlink=False))
    assert ran(node) == ["nvbandwidth -t %s %s" % (bw.H2D, bw.D2H)]               # PCIe: no peer reads
    assert "no published floor for %s" % pro in entry["message"], entry
    record = kept(node, "nvbandwidth")
    assert record["passed"] and not record["judged"] and record["measured"]["host_to_gpu"] == [55.59, 55.6]
    floor = node["active"]("nvbandwidth", gpus(2, name=pro, nvlink=False), min_host_bandwidth=56.0)
    assert floor["message"] == "" and kept(node, "nvbandwidth")["failures"] == [
        "host to GPU 0: 55.6 GB/s, under 56", "host to GPU 1: 55.6 GB/s, under 56"]


@pytest.mark.parametrize("fixture, passed, failures", [
    ("all-reduce-h100-x8.txt", True, []),
    ("all-reduce-h100-x8-one-link-down.txt", False, ["bus bandwidth 253.4 GB/s at 16384 MiB, under 460"]),
    ("all-reduce-h100-x8-wrong-data.txt", False, ["all_reduce returned wrong data (3 values out of bounds)"]),
])
def test_all_reduce_on_every_gpu_is_kept_with_its_verdict(node, fixture, passed, failures):
    (node["dir"] / "all-reduce.txt").write_text(read(fixture))
    entry = node["active"]("nccl_all_reduce", gpus(8))
    assert entry["state"] == "ok" and ran(node) == ["all_reduce_perf -b 16G -e 16G -g 8"], entry
    record = kept(node, "nccl_all_reduce")
    assert (record["passed"], record["failures"]) == (passed, failures)
    assert record["measured"]["busbw_by_bytes"] == {"17179869184": bw.parse_all_reduce(read(fixture))["rows"][0]["busbw"]}


def test_a_busy_node_never_starts_a_bandwidth_test_and_keeps_nothing(node):
    (node["dir"] / "all-reduce.txt").write_text(read("all-reduce-h100-x8.txt"))
    facts = gpus(8)
    facts["devices"][2]["compute_apps"] = [{"pid": 4425, "name": "python3"}]
    entry = node["active"]("nccl_all_reduce", facts)
    assert entry["state"] == "not_run" and "1 compute process(es) on the GPUs: python3 (pid 4425)" in entry["message"]
    assert ran(node) == [] and not (node["tmp"] / "state").exists()


@pytest.mark.parametrize("files, executable, state, words", [
    ({"sleep-bandwidth": "5", "nvbandwidth.txt": "x"}, "stand-in", "timeout", "ran past its budget of 1.0s and was killed"),
    ({}, "stand-in", "error", "CUDA error: no CUDA-capable device is detected"),
    ({}, None, "absent", "nvbandwidth is not installed (or give its path as executable)"),
])
def test_a_hung_failing_or_missing_tool_is_said_and_nothing_is_kept(node, files, executable, state, words):
    for name, text in files.items():
        (node["dir"] / name).write_text(text)
    entry = node["active"]("nvbandwidth", gpus(8), executable=executable, budget=1)
    assert entry["state"] == state and words in entry["message"], entry
    assert not (node["tmp"] / "state").exists()


# ---- the readiness check that reads the kept results (never reruns a test)

def record(passed=True, judged=True, age_hours=1.0, failures=()):
    return {"passed": passed, "judged": judged, "verified_at": NOW - age_hours * 3600,
            "valid_until": NOW - age_hours * 3600 + 24 * 3600, "failures": list(failures)}


@pytest.mark.parametrize("kept, status, words", [
    ({"nvbandwidth": record(), "nccl_all_reduce": record()}, "ok", ""),
    ({"nvbandwidth": record()}, "failed", "nccl_all_reduce: no result is kept on the node: run the bandwidth active tests"),
    ({"nvbandwidth": record(age_hours=30), "nccl_all_reduce": record()}, "failed",
     "nvbandwidth: the kept result expired (30.0 h old, 24 h allowed)"),
    ({"nvbandwidth": record(passed=False, failures=["host to GPU 3: 26.0 GB/s, under 48"]), "nccl_all_reduce": record()},
     "failed", "nvbandwidth failed 1.0 h ago: host to GPU 3: 26.0 GB/s, under 48"),
    ({"nvbandwidth": record(judged=False), "nccl_all_reduce": record()}, "failed",
     "nvbandwidth was kept 1.0 h ago without a verdict: no floor is published for this GPU model and none was given"),
])
def test_the_preflight_requires_passing_judged_bandwidth_results_younger_than_the_limit(kept, status, words):
    from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _gpu_health_checks
    facts = {"gpus": dict(gpus(8), bandwidth_results=dict((test, {"path": "/x", "record": rec}) for test, rec in kept.items()))}
    policy = {"bandwidth_result_max_age": 24, "bandwidth_result_tests": ["nvbandwidth", "nccl_all_reduce"]}
    entry = _gpu_health_checks.check_bandwidth_result(facts, policy, now=lambda: NOW)
    assert entry["status"] == status and words in entry["message"], entry
    assert _gpu_health_checks.check_bandwidth_result(facts, dict(policy, bandwidth_result_max_age=0)) is None   # off


def test_the_preflight_reads_the_files_the_active_test_writes_by_default():
    from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy, _policy_validation
    from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options as table
    policy = _policy_validation.validate_policy(dict(table.defaults(), profiles=["gpu"], bandwidth_result_max_age=12))
    assert _policy.bandwidth_result_paths(policy) == bw.STATE_FILES


def test_every_active_test_keeps_its_result_where_the_readiness_defaults_read_it():
    from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options as table
    defaults = table.defaults()
    assert _dcgm_deep.STATE_FILE == os.path.join(bw.RESULT_DIR, bw.RESULT_FILES["dcgm_diag"]) == defaults["dcgm_result_path"]
    assert defaults["bandwidth_result_dir"] == bw.RESULT_DIR
