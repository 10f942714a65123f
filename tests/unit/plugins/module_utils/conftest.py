# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module_utils tests' shared helpers (community.general's shape): a validated policy, memory and process
facts, the GPU/toolchain/disk/kernel-event fact builders and the healthy node every gpu/build check passes on.

Tests take ``healthy_facts`` (a fresh copy) as a fixture; parametrize tables, built at collection time, import the
builders by their collection name (``ansible_collections.gpufleet.preflight.tests.unit.plugins.module_utils.conftest``).
No test loads another test file: what two tests share lives here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import shutil
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy_validation


# ---------------------------------------------------------------- policies, memory and processes (test_policy*)
def policy(**overrides):
    args = dict(min_available_memory="4GiB", max_build_processes=0, max_memory_pressure=10.0,
                build_process_patterns=[], profiles=["build", "gpu"], custom_checks=[], wait=0, interval=5)
    args.update(overrides)
    return _policy_validation.validate_policy(args)


def memory(available, total, limited_by="host", host_total=None, pressure=None):
    return {
        "host": {"total_bytes": host_total or total},
        "effective": {"available_bytes": available, "total_bytes": total, "limited_by": limited_by},
        "pressure": pressure or {"present": False, "reason": "no /proc/pressure/memory"},
        "errors": [],
    }


def procs(*entries):
    return {"count": len(entries), "processes": [
        dict(pid=pid, name=name, orphaned=orphaned, zombie=zombie, age_seconds=age) for pid, name, orphaned, zombie, age in entries]}


# ---------------------------------------------------------------- gpus, toolchain, disks, kernel events
GIB = 2 ** 30


def device(index, **over):
    dev = {"index": index, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "uuid": "GPU-%d" % index,
           "compute_capability": "12.0", "driver_version": "580.65.06", "ecc_uncorrected": 0,
           "remapped_rows_pending": False, "remapped_rows_failure": False, "compute_apps": [],
           "pci_bus_id": "00000000:%02X:00.0" % (0x18 + index), "serial": "17951250010%02d" % index,
           "pcie_gen_current": 1, "pcie_gen_max": 5, "pcie_width_current": 16, "pcie_width_max": 16, "utilization_gpu": 0,
           "temperature": 31, "clock_event_reasons": ["gpu_idle"], "persistence_mode": True, "mig_mode": "disabled",
           "nvlink": dict((link, 26.562) for link in range(18)),
           "nvlink_errors": dict((link, {"replay": 0, "recovery": 0, "crc": 0}) for link in range(18)),
           "query": {"fabric_state": "Completed", "fabric_status": "Success", "fabric_health_summary": None,
                     "reset_required": None, "drain_and_reset_recommended": None, "recovery_action": "None"}}
    dev.update(over)
    return dev


def gpus(count=8, state="ok", message="", devices=None, driver="580.65.06"):
    devs = devices if devices is not None else [device(i) for i in range(count)]
    return {"present": bool(devs), "state": state, "message": message, "count": len(devs), "devices": devs,
            "driver_version": driver if devs else None,
            "probes": dict((name, {"state": "ok", "seconds": 0.1, "command": "nvidia-smi", "message": ""})
                           for name in ("nvlink_status", "nvlink_errors", "query")),
            }


DCGM_PASS = {"state": "ok", "seconds": 4.2, "command": "dcgmi diag -r 1", "message": "",
             "tests": [{"section": "Deployment", "test": "Denylist", "result": "Pass", "detail": ""}]}


def nvcc(cuda="13.0", archs=(75, 80, 86, 89, 90, 100, 103, 110, 120, 121), present=True):
    return {"present": present, "version": cuda + ".88" if present else None, "cuda_version": cuda if present else None,
            "error": None if present else "nvcc not found on PATH",
            "gpu_archs": ["compute_%d" % a for a in archs], "gpu_codes": ["sm_%d" % a for a in archs]}


def toolchain(**over):
    facts = {
        "nvcc": nvcc(),
        "cmake": {"present": True, "version": "3.31.6", "major_minor": "3.31", "policy_version_minimum_needed": False, "error": None},
        "numa": {"header_present": True, "header_path": "/usr/include/numa.h", "library_present": True,
                 "library_path": "/usr/lib/x86_64-linux-gnu/libnuma.so", "linkable": True,
                 "package_hint": "install libnuma-dev (Debian/Ubuntu) or numactl-devel (RHEL)"},
        "torch": {"present": True, "version": "2.11.0", "cuda": "13.0"},
        "cuda_libraries": dict((name, {"present": True, "source": "toolkit"}) for name in ("nvrtc", "cublas", "cublasLt", "driver")),
    }
    facts.update(over)
    return facts


def disk(free=80 * GIB, inodes=10 ** 7, exists=True, writable=True, checked="/tmp", error=None):
    return {"exists": exists, "checked_path": checked, "free_bytes": free, "free_inodes": inodes, "total_inodes": 2 * 10 ** 7,
            "mount_point": "/", "fstype": "ext4", "writable": writable, "read_only": False, "error": error}


def events(oom=(), xids=(), readable=True, window=86400, message="read 100 lines", sxids=()):
    return {"source": "kmsg" if readable else None, "readable": readable, "message": message, "window_seconds": window,
            "oom_kills": list(oom), "xids": list(xids), "sxids": list(sxids)}


def kill(age, pid=4425, process="python3", is_global=False):
    return {"time": 1.0, "age_seconds": age, "process": process, "pid": pid, "constraint": "CONSTRAINT_MEMCG",
            "cgroup": "/build/sgl", "global": is_global}


def xid(code, age=120.0, fatal=True, message="pid=1234, name=python3, GPU has fallen off the bus."):
    return {"time": 1.0, "age_seconds": age, "pci": "0000:3b:00", "code": code, "fatal": fatal, "message": message}


def sxid(code=24007, fatal=True, age=60.0):
    return {"time": 1.0, "age_seconds": age, "device": "nvidia-nvswitch1", "pci": "0000:06:00.0", "code": code,
            "fatal": fatal, "message": "%s, Link 44 error" % ("Fatal" if fatal else "Non-fatal")}


# the healthy node: every gpu/build check passes on it (test_gpu_build_checks, test_check_registry)
HEALTHY = {
    "gpus": dict(gpus(), probes=dict(gpus()["probes"], dcgm_diag=DCGM_PASS), dcgm_result={
        "path": "/var/lib/gpufleet/dcgm-diag.json",
        "record": {"level": 2, "passed": True, "verified_at": time.time() - 3600, "valid_until": time.time() + 23 * 3600, "failures": []}},
        bandwidth_results=dict((test, {"path": "/var/lib/gpufleet/%s.json" % test, "record": {
            "test": test, "passed": True, "judged": True, "verified_at": time.time() - 3600, "valid_until": time.time() + 23 * 3600,
            "failures": []}}) for test in ("nvbandwidth", "nccl_all_reduce"))),
    "toolchain": toolchain(),
    "disks": {"paths": {"/tmp": disk()}, "errors": []},
    "kernel_events": events(),
}


@pytest.fixture
def healthy_facts():
    """A copy of ``HEALTHY`` a test may change."""
    return copy.deepcopy(HEALTHY)


# ---------------------------------------------------------------- the stub nvidia-smi (tests/fleet/stubs)
GPU_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "gpus")
NVIDIA_SMI_STUB = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fleet",
                                                "stubs", "nvidia-smi"))


@pytest.fixture
def nvidia_smi_dir(tmp_path):
    """A directory holding an executable copy of the stub nvidia-smi (it answers from ``GPUFLEET_STUB_DIR``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(NVIDIA_SMI_STUB, str(bin_dir / "nvidia-smi"))
    os.chmod(str(bin_dir / "nvidia-smi"), 0o755)
    return str(bin_dir)


@pytest.fixture(scope="session")
def gpu_scenario(tmp_path_factory):
    """name -> a writable copy of fixtures/gpus/<name> to point ``GPUFLEET_STUB_DIR`` at: the stubs record what they
    were asked (``dcgm-runs.log``) beside the files they replay, and that must never land in the checkout (CI's fleet
    nodes once replayed a unit run's ``diag -r 1`` records from there)."""
    copies = {}

    def copy_of(name):
        if name not in copies:
            copies[name] = str(tmp_path_factory.mktemp("gpus") / name.replace("/", "_"))
            shutil.copytree(os.path.join(GPU_FIXTURES, name), copies[name])
        return copies[name]
    return copy_of
