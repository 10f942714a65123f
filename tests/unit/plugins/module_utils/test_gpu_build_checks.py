# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/_readiness/_gpu_build_checks.py: readiness checks on gpus / toolchain / disks / kernel_events facts, table-driven."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _gpu_build_checks as nc
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy
from ansible_collections.gpufleet.preflight.tests.unit.plugins.module_utils.conftest import (
    GIB, HEALTHY, device, disk, events, gpus, kill, nvcc, sxid, toolchain, xid)

# the gpu and build profiles' checks, from the one registry
PROFILE_CHECKS = [entry["function"] for entry in _policy.CHECKS if entry["profile"] in ("gpu", "build")]

REBOOT_154 = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"


POLICY = {"build_path": "/tmp", "require_cuda_libraries": True, "toolchain_python": "/venv/bin/python",
          "check_nvlink": True, "check_fabric": True, "check_gpu_recovery": True, "check_dcgm_diag": True,
          "dcgm_result_max_age": 24, "bandwidth_result_max_age": 24, "bandwidth_result_tests": ["nvbandwidth", "nccl_all_reduce"]}


def with_facts(**over):
    facts = copy.deepcopy(HEALTHY)
    for key, value in over.items():
        if value is None:
            facts.pop(key)
        else:
            facts[key] = value
    return facts


def test_healthy_node_passes_every_check():
    for check in PROFILE_CHECKS:
        entry = check(HEALTHY, POLICY)
        assert entry is not None and entry["status"] == "ok", entry
        assert entry["profile"] in ("gpu", "build")


CASES = [
    # (check, facts overrides, policy, status, words in message)
    (nc.check_gpu_count, {"gpus": gpus(7)}, {}, "failed", "7 GPUs found, 8 expected: check `nvidia-smi -L`"),
    (nc.check_gpu_count, {"gpus": gpus(4)}, {"expected_gpus": 4}, "ok", ""),
    (nc.check_gpu_count, {"gpus": gpus(devices=[], state="not_found", message="nvidia-smi not found on PATH")}, {},
     "failed", "0 GPUs usable, 8 expected: nvidia-smi not found"),
    (nc.check_gpu_count, {"gpus": gpus(devices=[], state="timeout", message="nvidia-smi did not answer within 10s")}, {},
     "unknown", "state is timeout"),
    (nc.check_gpu_count, {"gpus": None}, {}, "unknown", "not gathered"),
    (nc.check_compute_capability, {"gpus": gpus(devices=[device(0, compute_capability="10.0", name="NVIDIA B200")])}, {},
     "failed", "GPU 0 (NVIDIA B200) is compute capability 10.0, 12.0 expected"),
    (nc.check_compute_capability, {"gpus": gpus(devices=[device(0, compute_capability="10.0")])}, {"compute_capability": "10.0"},
     "ok", ""),
    (nc.check_compute_capability, {"gpus": gpus(devices=[device(0, compute_capability=None)])}, {}, "unknown", "compute_cap"),
    (nc.check_compute_capability, {"gpus": gpus(devices=[], state="gpu_lost", message="fallen off")}, {}, "unknown", "gpu_lost"),
    (nc.check_ecc_errors, {"gpus": gpus(devices=[device(0), device(5, ecc_uncorrected=2)])}, {}, "failed",
     "uncorrected ECC errors on GPU 5 (2)"),
    (nc.check_ecc_errors, {"gpus": gpus(devices=[device(0, ecc_uncorrected=None)])}, {}, "skipped", "no GPU reports ECC"),
    (nc.check_ecc_errors, {"gpus": gpus(devices=[device(0, ecc_uncorrected=1)])}, {"max_ecc_errors": 1}, "ok", ""),
    (nc.check_row_remaps, {"gpus": gpus(devices=[device(0), device(5, remapped_rows_pending=True)])}, {}, "failed",
     "GPU 5 have row remaps pending: reset"),
    (nc.check_row_remaps, {"gpus": gpus(devices=[device(1, remapped_rows_failure=True)])}, {}, "failed", "RMA"),
    (nc.check_row_remaps, {"gpus": gpus(devices=[device(0, remapped_rows_pending=None, remapped_rows_failure=None)])}, {},
     "skipped", "row remapping"),
    (nc.check_fatal_xid, {"kernel_events": events(xids=[xid(79)])}, {}, "failed",
     "1 fatal Xid error, latest Xid 79 on 0000:3b:00 2m 00s ago"),
    (nc.check_fatal_xid, {"kernel_events": events(xids=[xid(13, fatal=False)])}, {}, "ok", ""),
    (nc.check_fatal_xid, {"kernel_events": events(xids=[xid(13)])}, {"fatal_xids": [13]}, "failed", "Xid 13"),
    # issue 37: the r590 catalogue's classes, Xid 154's own recovery action as the hint, NVLink5 Fatal/Nonfatal
    (nc.check_fatal_xid, {"kernel_events": events(xids=[xid(54, message="x")])}, {}, "failed",
     "auxiliary power is not connected to the GPU board (SILENT_RUNNING_PWR_REDUCED_CLOCKING): check the GPU's auxiliary"),
    (nc.check_fatal_xid, {"kernel_events": events(xids=[xid(149, message="NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x0)"),
                                                        xid(154, message=REBOOT_154)])}, {}, "failed",
     "2 fatal Xid errors, latest Xid 154 on 0000:3b:00 2m 00s ago (%s), GPU recovery action Node Reboot Required: "
     "the driver asks for a node reboot" % REBOOT_154),
    (nc.check_fatal_xid, {"kernel_events": events(xids=[xid(149, message="NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x0)")])},
     {}, "failed", "NVLink5 NETIR error (NVLINK_NETIR_ERROR), fatal: NVLink fault: reset the GPU"),
    (nc.check_fatal_xid, {"kernel_events": events(xids=[xid(144, message="SAW_MVB Nonfatal XC0 i0 Link 0 (0x1 0x8)")])},
     {}, "ok", ""),
    (nc.check_fatal_xid, {"kernel_events": events(xids=[xid(154, message="GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")])},
     {},
     "failed", "GPU recovery action GPU Reset Required: the driver asks for a GPU reset (`nvidia-smi -r -i N`)"),
    (nc.check_fatal_xid, {"kernel_events": events(xids=[xid(165, message="x")])}, {}, "ok", ""),
    (nc.check_fatal_xid, {"kernel_events": events(xids=[xid(165, message="x")])}, {"xid_fail_actions": ["power_smoothing"]},
     "failed", "replace the GPU if they are not acceptable"),
    (nc.check_sxid, {"kernel_events": events(sxids=[sxid()])}, {}, "failed",
     "1 fatal SXid error, latest SXid 24007 on nvidia-nvswitch1 (0000:06:00.0) 1m 00s ago: Fatal, Link 44 error; the "
     "NVSwitch reported a fatal error: drain the node, stop Fabric Manager, reset the GPUs and NVSwitches"),
    (nc.check_sxid, {"kernel_events": events(sxids=[sxid(12028, fatal=False)])}, {}, "ok", ""),
    (nc.check_sxid, {"kernel_events": events(sxids=[sxid(12028, fatal=False)])}, {"sxid_fail_nonfatal": True}, "failed",
     "1 SXid error, latest SXid 12028 on nvidia-nvswitch1 (0000:06:00.0) 1m 00s ago: Non-fatal, Link 44 error; a "
     "non-fatal NVSwitch error"),
    (nc.check_sxid, {"kernel_events": dict((k, v) for k, v in events().items() if k != "sxids")}, {}, "skipped",
     "carry no SXid list"),
    (nc.check_sxid, {"kernel_events": events(sxids=[sxid()])}, {"check_sxid": False}, None, None),
    (nc.check_sxid, {"kernel_events": events(readable=False, message="no kernel log readable (/dev/kmsg: EPERM)")}, {},
     "unknown", "/dev/kmsg: EPERM"),
    (nc.check_fatal_xid, {"kernel_events": events(readable=False, message="no kernel log readable (/dev/kmsg: EPERM)")}, {},
     "unknown", "/dev/kmsg: EPERM"),
    (nc.check_gpu_compute_apps,
     {"gpus": gpus(devices=[device(3, compute_apps=[{"pid": 4425, "name": "python3", "used_memory_bytes": 80 * GIB}])])}, {},
     "failed", "GPU 3: python3 (pid 4425, 80Gi)"),
    (nc.check_gpu_compute_apps,
     {"gpus": gpus(devices=[device(3, compute_apps=[{"pid": 9, "name": "/usr/bin/dcgm-exporter", "used_memory_bytes": 0}])])},
     {"allowed_gpu_compute_apps": ["dcgm-exporter"]}, "ok", ""),
    (nc.check_gpu_compute_apps, {"gpus": gpus(devices=[device(0, compute_apps=None)])}, {}, "unknown", "could not list"),
    # a GPU process named with a bidi override: escaped in the verdict the console shows (issue 18 finding 13)
    (nc.check_gpu_compute_apps,
     {"gpus": gpus(devices=[device(1, compute_apps=[{"pid": 7, "name": "py\u202eexe.\x1b[31m", "used_memory_bytes": 0}])])}, {},
     "failed", "GPU 1: py\\u202eexe.\\x1b[31m (pid 7"),
    (nc.check_driver_version, {"gpus": gpus(driver="570.133.20")}, {}, "failed",
     "driver 570.133.20 is older than 580.65.06, which CUDA 13.0 (nvcc here) needs"),
    (nc.check_driver_version, {"gpus": gpus(driver="570.133.20"), "toolchain": toolchain(nvcc=nvcc("12.8"))}, {}, "ok", ""),
    (nc.check_driver_version, {"gpus": gpus(driver="550.54.15")}, {"min_driver_version": "560"}, "failed",
     "preflight_min_driver_version"),
    (nc.check_nvcc_arch, {"toolchain": toolchain(nvcc=nvcc("12.6", archs=(75, 80, 86, 89, 90)))}, {}, "failed",
     "nvcc 12.6 does not know sm_120a (it knows 75 to 90): install a newer CUDA toolkit (sm_120 needs CUDA >= 12.8)"),
    (nc.check_nvcc_arch, {"toolchain": toolchain(nvcc=nvcc(present=False))}, {}, "failed", "nvcc not found"),
    (nc.check_nvcc_arch, {"toolchain": toolchain(nvcc=dict(nvcc(), gpu_archs=[], gpu_codes=[], error="nvcc --list-gpu-arch exited 1"))},
     {}, "unknown", "did not list"),
    (nc.check_nvcc_arch, {"toolchain": None}, {}, "unknown", "toolchain facts were not gathered"),
    (nc.check_cmake_version, {"toolchain": toolchain(cmake={"present": True, "version": "3.25.1", "policy_version_minimum_needed": False})},
     {"cmake_min_version": "3.31"}, "failed", "cmake 3.25.1 is older than 3.31: `pip install 'cmake>=3.31'`"),
    (nc.check_cmake_version, {"toolchain": toolchain(cmake={"present": True, "version": "4.2.1", "policy_version_minimum_needed": True})},
     {"cmake_policy_version_minimum": ""}, "failed", "CMAKE_POLICY_VERSION_MINIMUM=3.5"),
    (nc.check_cmake_version, {"toolchain": toolchain(cmake={"present": True, "version": "4.2.1", "policy_version_minimum_needed": True})},
     {}, "ok", ""),
    (nc.check_cmake_version, {"toolchain": toolchain(cmake={"present": True, "version": "4.2.1", "policy_version_minimum_needed": True})},
     {"cmake_max_version": "4.2"}, "ok", ""),
    (nc.check_cmake_version, {"toolchain": toolchain(cmake={"present": True, "version": "4.3.0", "policy_version_minimum_needed": True})},
     {"cmake_max_version": "4.2"}, "failed", "newer than 4.2"),
    (nc.check_cmake_version, {"toolchain": toolchain(cmake={"present": False, "version": None, "error": "cmake not found"})}, {},
     "failed", "cmake not found"),
    (nc.check_numa_header, {"toolchain": toolchain(numa={"header_present": False, "library_present": True, "linkable": False,
                                                         "library_path": "/usr/lib/x86_64-linux-gnu/libnuma.so.1",
                                                         "package_hint": "install libnuma-dev (Debian/Ubuntu) or numactl-devel (RHEL)"})},
     {}, "failed", "numa.h and libnuma.so (only the runtime /usr/lib/x86_64-linux-gnu/libnuma.so.1) missing"),
    (nc.check_numa_header, {"toolchain": toolchain(numa={"header_present": False})}, {"require_numa": False}, None, ""),
    (nc.check_disk_space, {"disks": {"paths": {"/tmp": disk(free=3 * GIB)}}}, {}, "failed", "/tmp has 3.0Gi free on /, 20Gi needed"),
    (nc.check_disk_space, {"disks": {"paths": {"/tmp": disk(inodes=50)}}}, {}, "failed", "50 inodes free, 100000 needed"),
    (nc.check_disk_space, {"disks": {"paths": {"/tmp": disk(inodes=None)}}}, {}, "ok", ""),
    (nc.check_disk_space, {"disks": {"paths": {"/b/sgl": disk(free=3 * GIB, exists=False, checked="/b")}}},
     {"build_path": "/b/sgl", "min_free_disk": "1GiB"}, "ok", ""),
    (nc.check_disk_space, {"disks": {"paths": {"/b/sgl": disk(free=3 * GIB, exists=False, checked="/b")}}},
     {"build_path": "/b/sgl", "min_free_disk": 4 * GIB}, "failed", "/b/sgl (not there yet; measured at /b) has 3.0Gi free"),
    (nc.check_disk_space, {"disks": {"paths": {"/tmp": disk(writable=False)}}}, {}, "failed", "not writable"),
    (nc.check_disk_space, {"disks": {"paths": {"/tmp": disk(free=None, error="/tmp: Permission denied")}}}, {}, "unknown",
     "Permission denied"),
    (nc.check_disk_space, {}, {"min_free_disk": "lots"}, "unknown", "min_free_disk"),
    (nc.check_recent_oom, {"kernel_events": events(oom=[kill(600)])}, {}, "failed",
     "1 OOM kill in the last 60 min, latest python3 (pid 4425) in cgroup /build/sgl 10m 00s ago: lower MAX_JOBS"),
    (nc.check_recent_oom, {"kernel_events": events(oom=[kill(7200)])}, {}, "ok", ""),
    (nc.check_recent_oom, {"kernel_events": events(oom=[kill(7200, is_global=True)])}, {"oom_window_minutes": 180}, "failed",
     "the whole node (global OOM)"),
    (nc.check_recent_oom, {"kernel_events": events(readable=False, message="no kernel log readable")}, {}, "unknown",
     "no kernel log readable"),
    (nc.check_recent_oom, {}, {"oom_window_minutes": 0}, None, ""),
    # A guarded build's own limit killing a compile is its backoff at work, not a sick node.
    (nc.check_recent_oom, {"kernel_events": events(oom=[dict(kill(60), cgroup="/build/gpufleet-build-sgl-0a1b2c3d",
                                                             oom_cgroup="/build/gpufleet-build-sgl-0a1b2c3d")] * 2)},
     {}, "ok", "2 OOM kills inside guarded builds' own cgroups, handled by their job backoff"),
    (nc.check_recent_oom, {"kernel_events": events(oom=[dict(kill(60), cgroup="/build/gpufleet-build-sgl-0a1b2c3d",
                                                             oom_cgroup="/build/gpufleet-build-sgl-0a1b2c3d"),
                                                        kill(30)])},
     {}, "failed", "1 OOM kill in the last 60 min, latest python3"),
    (nc.check_recent_oom, {"kernel_events": events(oom=[dict(kill(60, is_global=True), cgroup="/build/gpufleet-build-sgl-0a1b2c3d")])},
     {}, "failed", "the whole node (global OOM)"),
]


@pytest.mark.parametrize("check, over, policy, status, words", CASES,
                         ids=["%s-%d" % (case[0].__name__[6:], i) for i, case in enumerate(CASES)])
def test_check(check, over, policy, status, words):
    entry = check(with_facts(**over), dict(POLICY, **policy))
    if status is None:
        assert entry is None
        return
    assert entry["status"] == status, entry
    assert words in entry["message"], entry["message"]
    assert entry["ok"] is (status in ("ok", "skipped"))


def test_checks_tuple_names_are_unique_and_profiled():
    names = [check(HEALTHY, POLICY)["name"] for check in PROFILE_CHECKS]
    assert len(set(names)) == len(names) == 26
    profiles = dict((check(HEALTHY, POLICY)["name"], check(HEALTHY, POLICY)["profile"]) for check in PROFILE_CHECKS)
    assert profiles["gpu_count"] == "gpu" and profiles["disk_space"] == "build" and profiles["nvcc_arch"] == "build"


@pytest.mark.parametrize("kill_entry, own, concerns", [
    ({"global": True, "cgroup": "/other"}, "/fleet/node1", True),
    ({"global": False, "cgroup": "/fleet/node1"}, "/fleet/node1", True),
    ({"global": False, "cgroup": "/fleet/node1/build"}, "/fleet/node1", True),
    ({"global": False, "cgroup": "/fleet/node10"}, "/fleet/node1", False),
    ({"global": False, "cgroup": "/fleet/node2"}, "/fleet/node1", False),
    ({"global": False, "cgroup": None}, "/fleet/node1", True),
    ({"global": False, "cgroup": "/anything"}, "/", True),
    ({"global": False, "cgroup": "/anything"}, None, True),
    ({"global": False, "cgroup": "/fleet/node1x"}, "/fleet/node1", False),
    ({"global": False, "oom_cgroup": "/system.slice/x.service"}, "/", True),
])
def test_oom_kill_concerns_only_its_memory_domain(kill_entry, own, concerns):
    assert nc.concerns_node(kill_entry, own) is concerns


@pytest.mark.parametrize("memory, domain", [
    ({"cgroup": {"path": "/fleet/node1/sshd", "limit_path": "/fleet/node1"}}, "/fleet/node1"),
    # a systemd host without a cgroup limit: ssh's session scope is not the node, the machine is
    ({"cgroup": {"path": "/user.slice/user-0.slice/session-4.scope", "limit_path": None}, "host_pid_namespace": True},
     "/"),
    # a container without a memory limit (its own PID namespace): its own cgroup, not its neighbours'
    ({"cgroup": {"path": "/fleet/node3", "limit_path": None}, "host_pid_namespace": False}, "/fleet/node3"),
    ({"cgroup": {"path": "/", "limit_path": "/"}}, "/"),
    ({}, "/"),
    (None, "/"),
])
def test_node_memory_domain_is_the_binding_limit(memory, domain):
    assert nc.node_memory_domain(memory) == domain


def test_recent_oom_ignores_a_neighbours_kill():
    facts = {"kernel_events": events(oom=[dict(kill(60), cgroup="/fleet/node2")]),
             "memory": {"cgroup": {"path": "/fleet/node1/ssh", "limit_path": "/fleet/node1"}}}
    assert nc.check_recent_oom(facts, {})["status"] == "ok"
    facts["memory"]["cgroup"]["limit_path"] = "/fleet/node2"
    assert nc.check_recent_oom(facts, {})["status"] == "failed"


def test_recent_oom_on_an_unlimited_systemd_host_counts_a_system_service_kill():
    facts = {"kernel_events": events(oom=[dict(kill(60), cgroup="/system.slice/oomtest.service")]),
             "memory": {"cgroup": {"path": "/user.slice/user-0.slice/session-4.scope", "limit_path": None},
                        "host_pid_namespace": True}}
    assert nc.check_recent_oom(facts, {})["status"] == "failed"


def test_recent_oom_names_a_global_kill_of_a_neighbour_as_outside_this_node():
    # a global OOM on the shared host killed a process of another container: counted (the machine ran out), but the
    # hint names the victim and its cgroup and does not blame this node's build (issue 21)
    facts = {"kernel_events": events(oom=[dict(kill(60, process="java", pid=777, is_global=True), cgroup="/fleet/node2")]),
             "memory": {"cgroup": {"path": "/fleet/node1/ssh", "limit_path": "/fleet/node1"}}}
    entry = nc.check_recent_oom(facts, {})
    assert entry["status"] == "failed"
    assert "latest java (pid 777) in cgroup /fleet/node2, killed by the whole node (global OOM)" in entry["message"]
    assert "outside this node's memory domain (/fleet/node1)" in entry["message"]
    assert "MAX_JOBS" not in entry["message"]
    facts["kernel_events"]["oom_kills"][0]["cgroup"] = "/fleet/node1/build"
    inside = nc.check_recent_oom(facts, {})["message"]
    assert "in cgroup /fleet/node1/build" in inside and "lower MAX_JOBS" in inside and "outside" not in inside


def test_recent_oom_names_the_limit_that_killed_when_it_is_another_cgroup():
    facts = {"kernel_events": events(oom=[dict(kill(60), cgroup="/build/sgl/worker", oom_cgroup="/build")])}
    assert "in cgroup /build/sgl/worker 1m 00s ago (the limit of /build)" in nc.check_recent_oom(facts, {})["message"]


@pytest.mark.parametrize("kill, status, said", [
    # the test suite's deliberate kill in its own cgroup under the host's: left out, named
    (dict(kill(60), cgroup="/box/gpufleet-test-4411-ab/node2", oom_cgroup="/box/gpufleet-test-4411-ab/node2"), "ok",
     "1 in cgroups oom_ignore_cgroups leaves out (latest in /box/gpufleet-test-4411-ab/node2)"),
    # a build's own container (the seed's case): the node's cgroup itself always counts
    (dict(kill(60), cgroup="/box", oom_cgroup="/box"), "failed", "1 OOM kill in the last 60 min"),
    # a global OOM is never another tenant's
    (dict(kill(60, is_global=True), cgroup="/box/gpufleet-test-4411-ab/node2"), "failed", "global OOM"),
    # another tenant the policy does not name: counts
    (dict(kill(60), cgroup="/box/trainer", oom_cgroup="/box/trainer"), "failed", "in cgroup /box/trainer"),
])
def test_recent_oom_leaves_out_the_cgroups_the_policy_names(kill, status, said):
    """Issue 39: right after `make test`, `make preflight` on the same machine was not ready for an hour - recent_oom
    counted the suite's deliberate kills in its own cgroups."""
    facts = {"kernel_events": events(oom=[kill]), "memory": {"cgroup": {"path": "/box", "limit_path": "/box"}}}
    found = nc.check_recent_oom(facts, {"oom_ignore_cgroups": ["gpufleet-test-*"]})
    assert found["status"] == status and said in found["message"], found


def test_a_node_inside_an_ignored_cgroup_judges_its_own_kills():
    """The patterns are matched below the node's own cgroup only: a test fleet node living in gpufleet-test-* counts
    the kills in its own cgroup."""
    here = "/box/gpufleet-test-4411-ab/node2"
    facts = {"kernel_events": events(oom=[dict(kill(60), cgroup=here, oom_cgroup=here)]),
             "memory": {"cgroup": {"path": here, "limit_path": here}}}
    assert nc.check_recent_oom(facts, {"oom_ignore_cgroups": ["gpufleet-test-*"]})["status"] == "failed"
