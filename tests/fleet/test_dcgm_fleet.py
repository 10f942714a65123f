# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deeper DCGM diagnostics on the fleet (issue 37 item 2): the active test runs ``dcgmi diag -r 2 -j`` (the stand-in)
only on idle nodes and keeps its result; the preflight reads the kept result without rerunning it.

Every node an HGX H100 pair. node1: healthy. node2: level 2 fails GPU Memory on GPU 1. node3: a compute process on
GPU 0. node4: a compile admitted by a real admission ledger (its launcher a live process on the node). node5: its kept
result is 48 hours old."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import time

from fleetlib import REPO_ROOT, flagged, install_gpus, report_hosts, run_playbook

PLAYBOOK = os.path.join(REPO_ROOT, "playbooks", "preflight.yml")
ACTIVE_TESTS = os.path.join(REPO_ROOT, "playbooks", "active_tests.yml")
BANDWIDTH = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "gpus", "bandwidth")
DCGM = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "gpus", "dcgm")
STUBS = "/usr/local/sbin/nvidia-smi.d"


def said_by_node(stdout):
    """{node: the lines of the playbook's last debug task}, from the default callback's output."""
    found = re.finditer(r'^ok: \[(\w+)\] => (\{\n.*?\n\})$', stdout, re.M | re.S)
    return dict((match.group(1), json.loads(match.group(2))["msg"]) for match in found)


def fixture(name, folder=DCGM):
    with open(os.path.join(folder, name)) as handle:
        return handle.read()


def test_dcgm_level_2_kept_result_flags_only_its_node_and_busy_nodes_never_run_it(fresh_fleet, tmp_path):
    fleet = fresh_fleet(5)
    app = "GPU-4039dfe4-0c97-4b1e-683e-eb7d42699053, 4425, python3, 80000\n"
    for node in fleet.nodes:
        files = {"dcgm-diag-r2.json": fixture("diag-r2-memory-fail.json" if node.name == "node2" else "diag-r2-pass.json"),
                 "nvbandwidth.txt": fixture("nvbandwidth-h100-x8%s.txt" % ("-gpu3-gen4-link" if node.name == "node2" else ""), BANDWIDTH),
                 "all-reduce.txt": fixture("all-reduce-h100-x8%s.txt" % ("-one-link-down" if node.name == "node5" else ""), BANDWIDTH)}
        if node.name == "node3":
            files["compute-apps.csv"] = app
        install_gpus(node, scenario="h100_x2_nvswitch", files=files)
        os.makedirs(os.path.join(fleet.dir, node.name, "admission"))
    launcher = fleet["node4"].run("setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!", check=True).stdout.strip()
    with open(os.path.join(fleet.dir, "node4", "admission", "ledger.json"), "w") as handle:
        json.dump({launcher: {"state": "running", "bytes": 2 << 30, "since": time.time(), "group": "b1"}}, handle)

    # the shipped playbook, as a person runs it in a maintenance window: every active test
    result = run_playbook(ACTIVE_TESTS, fleet.inventory_path, extra_vars={
        "active_tests": ["dcgm_diag", "nvbandwidth", "nccl_all_reduce"], "active_tests_budget": 30,
        "active_tests_result_dir": "%s/{{ inventory_hostname }}" % fleet.dir,
        "active_tests_admission_dirs": ["%s/{{ inventory_hostname }}/admission" % fleet.dir]})
    assert result.rc == 0 and "Traceback" not in result.stdout + result.stderr, result.stdout[-3000:]
    said = said_by_node(result.stdout)
    for name in ("node1", "node2", "node5"):
        assert [line.split(":", 1)[0] for line in said[name]] == ["dcgm_diag", "nvbandwidth", "nccl_all_reduce"], said
    assert all(": passed; valid until " in line for line in said["node1"]), said["node1"]
    assert said["node2"][0].startswith("dcgm_diag: dcgmi diag -r 2 -j in 0 s: FAILED: GPU Memory on GPU 1; valid until"), said["node2"]
    assert "FAILED: host to GPU 3: 26.0 GB/s, under 48; GPU 3 to host: 26.0 GB/s, under 48; GPU 5 to GPU 6" in said["node2"][1]
    assert "FAILED: bus bandwidth 253.4 GB/s at 16384 MiB, under 460" in said["node5"][2], said["node5"]
    assert all("1 compute process(es) on the GPUs: python3 (pid 4425)" in line for line in said["node3"]), said["node3"]
    assert all("admitted by the build admission ledger (pid %s)" % launcher in line for line in said["node4"]), said["node4"]
    for name in ("node3", "node4"):
        assert fleet[name].run("cat %s/bandwidth-runs.log 2>/dev/null || true" % STUBS).stdout == ""
    assert fleet["node1"].run("cat %s/bandwidth-runs.log" % STUBS).stdout.splitlines() == [
        "nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce device_to_device_memcpy_read_ce",
        "all_reduce_perf -b 16G -e 16G -g 2"]
    for name in ("node3", "node4"):   # the busy nodes never started the diagnostic, kept nothing
        runs = fleet[name].run("cat %s/dcgm-runs.log 2>/dev/null || true" % STUBS).stdout
        assert runs == "", (name, runs)
        assert not os.path.exists(os.path.join(fleet.dir, name, "dcgm-diag.json"))
    assert fleet["node1"].run("cat %s/dcgm-runs.log" % STUBS).stdout.strip() == "diag -r 2 -j"
    stale = os.path.join(fleet.dir, "node5", "dcgm-diag.json")
    with open(stale) as handle:
        record = json.load(handle)
    record.update(verified_at=record["verified_at"] - 48 * 3600, valid_until=record["valid_until"] - 48 * 3600)
    with open(stale, "w") as handle:
        json.dump(record, handle)

    result = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars={
        "preflight_profiles": ["gpu"],
        "preflight_expected_gpus": 2,
        "preflight_compute_capability": "9.0",
        "preflight_min_available_memory": "1GiB",
        "preflight_allow_gpu_compute_apps": True,
        "preflight_dcgm_result_max_age": 24,
        "preflight_dcgm_result_path": "%s/{{ inventory_hostname }}/dcgm-diag.json" % fleet.dir,
        "preflight_bandwidth_result_max_age": 24,
        "preflight_bandwidth_result_dir": "%s/{{ inventory_hostname }}" % fleet.dir,
        "preflight_report_dir": str(tmp_path),
    })
    assert "Traceback" not in result.stdout + result.stderr
    hosts = report_hosts(tmp_path)
    failed = flagged(hosts)
    assert failed == {"node2": ["dcgm_result", "bandwidth_result"], "node3": ["dcgm_result", "bandwidth_result"],
                      "node4": ["dcgm_result", "bandwidth_result"], "node5": ["dcgm_result", "bandwidth_result"]}, \
        json.dumps(dict((n, hosts[n]["reason"]) for n in hosts), indent=1)
    checks = dict((n, dict((c["name"], c) for c in hosts[n]["checks"])) for n in hosts)
    assert "nvbandwidth failed " in checks["node2"]["bandwidth_result"]["message"] and \
        "host to GPU 3: 26.0 GB/s, under 48" in checks["node2"]["bandwidth_result"]["message"]
    assert "nccl_all_reduce failed " in checks["node5"]["bandwidth_result"]["message"]
    assert "nvbandwidth: no result is kept on the node" in checks["node3"]["bandwidth_result"]["message"]
    assert "GPU Memory on GPU 1" in hosts["node2"]["reason"] and "DCGM error 83" in hosts["node2"]["reason"]
    assert "expired (48.0 h old, 24 h allowed)" in hosts["node5"]["reason"] and "to refresh" in hosts["node5"]["reason"]
    for name in ("node3", "node4"):
        assert "no DCGM level-2 result is kept on the node: run the dcgm_diag active test" in hosts[name]["reason"], name
    node1 = dict((c["name"], c) for c in hosts["node1"]["checks"])
    assert node1["dcgm_result"]["status"] == "ok" and node1["bandwidth_result"]["status"] == "ok", node1
    # the preflight read the kept results: no node ran dcgmi again
    assert fleet["node1"].run("cat %s/dcgm-runs.log" % STUBS).stdout.strip() == "diag -r 2 -j"
    fleet["node4"].run("kill %s" % launcher)
