# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/field_test_report.py, the record of a field test of the real tree (which CI does not have), on a build
directory laid out as the real one is: per-object seconds from .ninja_log, CUDA objects done / total from
build.ninja, the launcher's peaks and the sampler's per-process peaks - each process counted for its own source only
(``topk`` is not ``moe_topk_softmax_kernels``, whose nvcc intermediates are ``tmpxft_<ids>-<n>_<stem>.<phase>``)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REPORT = os.path.join(REPO, "bench", "field_test_report.py")
GIB = 1024 ** 3


def test_report_attributes_each_process_to_its_own_source(tmp_path):
    build = tmp_path / "sgl-kernel" / "build"
    ninja_dir = build / "cp310-abi3-linux_x86_64"
    ninja_dir.mkdir(parents=True)
    # the last: a FetchContent source, its object named by its whole path, its key offline/<folder>/<path>
    objects = ["csrc/elementwise/topk.cu", "csrc/moe/moe_topk_softmax_kernels.cu", "csrc/gemm/fp8_gemm_kernel.cu",
               "data/deps/repo-flashinfer/csrc/norm.cu"]
    rules = "".join("build CMakeFiles/ops.dir/%s.o: CUDA_COMPILER__ops_Release /src/%s\n" % (o, o) for o in objects)
    (ninja_dir / "build.ninja").write_text(rules)
    for done in objects[:2] + objects[3:]:
        target = ninja_dir / "CMakeFiles" / "ops.dir" / (done + ".o")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"\x7fELF")
    (ninja_dir / ".ninja_log").write_text("# ninja log v7\n0\t35000\t1\tCMakeFiles/ops.dir/%s.o\th\n"
                                          "0\t134000\t1\tCMakeFiles/ops.dir/%s.o\th\n"
                                          "0\t37000\t1\tCMakeFiles/ops.dir/%s.o\th\n" % (objects[0], objects[1], objects[3]))
    (build / "gpufleet-build.status.json").write_text(json.dumps({
        "state": "stopped", "memory_limit_human": "16Gi",
        "attempts": [{"attempt": 1, "jobs": 2, "kind": "oom", "oom_kills": 1}, {"attempt": 2, "jobs": 1, "kind": "interrupted"}]}))
    peaks = tmp_path / "peaks.json"
    keyed = "sgl-kernel@0.3.19/120@7b9156c773f0:" + objects[0] + "#1a2b3c4d"     # as the launcher keys it
    peaks.write_text(json.dumps({"csrc/moe/grouped_topk.cu": {"peak_bytes": 9 * GIB}, keyed: {"peak_bytes": int(0.56 * GIB)},
                                 objects[1]: {"peak_bytes": int(2.82 * GIB)},
                                 "sgl-kernel@0.3.19/120:offline/repo-flashinfer/csrc/norm.cu#1a2b3c4d": {"peak_bytes": int(1.04 * GIB)}}))
    out = tmp_path / "out"
    out.mkdir()
    (out / "processes.json").write_text(json.dumps({"processes": [
        {"name": "cicc", "peak_bytes": int(0.53 * GIB), "source": "/tmp/tmpxft_00001_00000000-7_topk.cpp1.ii"},
        {"name": "cicc", "peak_bytes": int(2.82 * GIB),
         "source": "/tmp/tmpxft_00002_00000000-7_moe_topk_softmax_kernels.cpp1.ii"},
        {"name": "cudafe++", "peak_bytes": int(2.10 * GIB), "source": "/src/" + objects[1]},
    ]}))
    proc = subprocess.run([sys.executable, REPORT, "--build", str(build), "--venv", str(tmp_path / "venv"), "--out",
                           str(out), "--wall", "600", "--rc", "2", "--peaks", str(peaks)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["cuda_objects_done"], summary["cuda_objects_total"], summary["oom_kills"]) == (3, 4, 1)
    rows = dict((row["object"], row) for row in summary["objects"])
    assert rows[objects[0]]["by_process"] == {"cicc": int(0.53 * GIB)}, rows[objects[0]]
    assert rows[objects[1]]["by_process"] == {"cicc": int(2.82 * GIB), "cudafe++": int(2.10 * GIB)}
    assert rows[objects[0]]["seconds"] == 35.0 and rows[objects[0]]["launcher_peak_bytes"] == int(0.56 * GIB)
    assert rows[objects[3]]["launcher_peak_bytes"] == int(1.04 * GIB), rows[objects[3]]
    assert "| csrc/elementwise/topk.cu | 35 | 0.56 GiB | 0.53 GiB | - |" in (out / "field-test.md").read_text()
    assert "wheel" not in summary   # none built: nothing claimed
    assert summary["failure"] is None   # no playbook log beside it


def test_a_run_refused_before_building_says_why(tmp_path):
    """The 12 GiB field run of 2026-12-05: the role refused before configure, and the summary said only 'state None'."""
    build = tmp_path / "build"
    build.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    refusal = ("sgl_kernel: the budget of 11.9 GiB is below what these sources need alone: csrc/gemm/fp8_gemm_kernel.cu "
               "(15.1 GiB in the shipped census); the smallest memory limit that builds them: 15.2 GiB")
    (out / "playbook.log").write_text("TASK [x] ***\nok: [localhost]\nfatal: [localhost]: FAILED! => %s\n\nPLAY RECAP ***\n"
                                      % json.dumps({"changed": False, "msg": refusal}))
    proc = subprocess.run([sys.executable, REPORT, "--build", str(build), "--venv", str(tmp_path / "venv"), "--out",
                           str(out), "--wall", "12", "--rc", "2", "--peaks", str(tmp_path / "none.json")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout
    assert json.loads((out / "summary.json").read_text())["failure"] == refusal
    assert "the playbook failed: " + refusal in (out / "field-test.md").read_text()
