# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A torch C++ extension built by torch.utils.cpp_extension (flash-attention's way: setup.py, BuildExtension, ninja,
MAX_JOBS) under memory admission through guarded_build alone (issue 29 item 4), with real processes and a real cgroup.

tests/projects/torch_ext_mixed: two sources that hold 300 MiB while compiling, eight of 40 MiB, one long light one
(z_long, 6 s) that ninja would start last, a binding. guarded_build runs it at jobs 16 (its MAX_JOBS) under a
1000 MiB cgroup (400 MiB of it reserved for setup.py, which holds torch), with the build's CXX set to guarded_build's
admission wrapper ($GPUFLEET_ADMISSION_CXX; TORCH_NO_COMPILER_WRAPPER=1 so torch puts no ccache before it): the
admission ledger saw every compile, ninja ran wide (z_long, the 12th edge in ninja's order, was the first one started: every compile
was already waiting in the ledger), no more ran than the CPUs, 0 OOM kills, and the extension imports.

torch: a CPU wheel (pip install torch==2.13.0, offline on this machine) in a venv shared under a lock; CUDAExtension
cannot build with it (torch.version.cuda is None: see docs/benchmarks.md), so the sources are C++."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import PROJECTS, run_module

PROJECT = os.path.join(PROJECTS, "torch_ext_mixed")
HOGCC = os.path.join(PROJECTS, "standin_mixed_memory", "hogcc.py")
TORCH_HOME = os.environ.get("GPUFLEET_TEST_TORCH_VENV_HOME", "/var/tmp/gpufleet-torch-ext")
MIB = 1024 ** 2


def torch_venv():
    """A venv with torch 2.13.0 (CPU), ninja and setuptools, made once per machine under a lock; its python."""
    venv = os.path.join(TORCH_HOME, "venv")
    python = os.path.join(venv, "bin", "python")
    os.makedirs(TORCH_HOME, exist_ok=True)
    with open(os.path.join(TORCH_HOME, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        probe = "import torch, ninja, setuptools; assert torch.__version__.startswith('2.13.0')"
        if not os.path.exists(python) or subprocess.call([python, "-c", probe], stderr=subprocess.DEVNULL) != 0:
            subprocess.check_call([sys.executable, "-m", "venv", venv])
            proc = subprocess.run([python, "-m", "pip", "install", "-q", "torch==2.13.0", "ninja", "setuptools"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
            if proc.returncode != 0:
                pytest.skip("torch 2.13.0 could not be installed here: %s" % proc.stdout[-500:])
    return python


def test_torch_extension_builds_under_admission_through_guarded_build_alone(tmp_path):
    python = torch_venv()
    project = tmp_path / "project"
    shutil.copytree(PROJECT, str(project))
    hog_cxx = tmp_path / "hog-c++"
    hog_cxx.write_text("#!/bin/sh\nexec %s %s c++ \"$@\"\n" % (sys.executable, HOGCC))
    hog_cxx.chmod(0o755)
    # the peaks another node learned (what a fleet seed hands over): keys are paths in the project
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps(dict(("csrc/" + name, {"peak_bytes": (320 if "heavy" in name else 60) * MIB, "killed": False,
                                                      "seconds": 6.0 if "long" in name else 4.0 if "heavy" in name else 1.0})
                                    for name in os.listdir(os.path.join(PROJECT, "csrc")))))
    guarded = str(tmp_path / "guarded")
    build = ("PATH=%s:$PATH TORCH_NO_COMPILER_WRAPPER=1 CXX=\"$GPUFLEET_ADMISSION_CXX\" %s setup.py build_ext --inplace"
             % (os.path.dirname(python), python))
    result = run_module({"argv": ["sh", "-c", build], "chdir": str(project), "build_dir": guarded, "name": "admit-torch-ext",
                         "jobs": 16, "memory_limit": "1000MiB", "memory_per_thread": "32MiB", "reserve": "0",
                         "max_attempts": 1, "force": True, "environment": {"CXX": str(hog_cxx)},
                         "admission": {"reserve_bytes": "400MiB", "default_bytes": "100MiB", "seed_peaks": [str(seed)],
                                       "peaks_path": str(tmp_path / "peaks.json"), "poll_seconds": 0.2,
                                       "settle_seconds": 2}})
    assert not result["failed"], result["_output"][-3000:]
    assert sum(attempt.get("oom_kills") or 0 for attempt in result["attempts"]) == 0, result["attempts"]
    with open(os.path.join(guarded, "gpufleet-admission", "ledger.log")) as handle:
        events = [json.loads(line) for line in handle]
    starts = [row for row in events if row["event"] == "start"]
    # setup.py's torch sits inside the 400 MiB reserved for it: charged a second time as overhead, the freeze evicted a
    # compile that fitted (the 2026-12-05 CI run) - nothing here needs evicting
    assert not [row for row in events if row["event"] == "evict"], events
    compiled = sorted(row["source"] for row in starts)
    assert compiled == sorted("csrc/" + name for name in os.listdir(os.path.join(PROJECT, "csrc"))), starts
    assert all(row["learned"] for row in starts), starts
    # ninja ran wide (MAX_JOBS=16): the last edge in its order was waiting at the first decision and, the longest, won
    assert starts[0]["source"] == "csrc/z_long.cpp", starts
    assert max(row["running_threads"] for row in starts) <= (os.cpu_count() or 1), starts
    learned = json.loads((tmp_path / "peaks.json").read_text())
    assert learned["csrc/a_heavy_1.cpp"]["peak_bytes"] >= 250 * MIB, learned
    total = subprocess.check_output([python, "-c", "import gpufleet_torch_ext_mixed as m; print(m.total())"],
                                    cwd=str(project), universal_newlines=True)
    assert total.strip() == "11"
