# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvcc threads per source (issue 29 item 3), with real processes: a stand-in ``nvcc`` that compiles each -gencode
target in a child process holding memory, ``--threads`` of them side by side, as nvcc runs cicc/ptxas. The threads
the scheduler gave each compile are read from the ledger's own log and from the command line the compiler got."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys

import pytest

from test_admission_scheduler import ADMISSION, MIB, events, finish, wait_running, write_config

NVCC = r'''#!%s
import os, subprocess, sys, time
args = sys.argv[1:]
threads = [int(a.split("=", 1)[1]) for a in args if a.startswith("--threads=")] or [1]
archs = [a for a in args if a.startswith("-gencode")]
out = args[args.index("-o") + 1]
hold = "b = bytearray(%%d * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\nimport time; time.sleep(%%s)" %% (
    int(os.environ.get("ARCH_MIB", "40")), os.environ.get("ARCH_SECONDS", "1.0"))
pending = list(archs)
while pending:   # nvcc --threads N: at most N per-arch compiles at a time
    batch, pending = pending[:threads[-1]], pending[threads[-1]:]
    for child in [subprocess.Popen([sys.executable, "-c", hold]) for _ in batch]:
        child.wait()
with open(out, "w") as handle:
    handle.write(" ".join(args))
'''
GENCODES = ("-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_100a,code=sm_100a",
            "-gencode=arch=compute_120a,code=sm_120a")


def standin(tmp_path):
    tools, src = tmp_path / "tools", tmp_path / "src"
    tools.mkdir()
    src.mkdir()
    nvcc = tools / "nvcc"
    nvcc.write_text(NVCC % sys.executable)
    nvcc.chmod(0o755)
    (src / "k.cu").write_text("__global__ void k() {}\n")
    return str(nvcc), src


def compile_cu(config, nvcc, src, out, gencodes, *extra, **env):
    return subprocess.Popen([sys.executable, ADMISSION, "--config=" + config, "--", nvcc] + list(extra) + list(gencodes) +
                            ["-c", str(src / "k.cu"), "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, env=dict(os.environ, **env))


def learned(tmp_path, key, by_threads):
    (tmp_path / "peaks.json").write_text(json.dumps({key: {
        "peak_bytes": max(by_threads.values()) * MIB, "seconds": 3.0, "killed": False,
        "by_threads": dict((str(t), p * MIB) for t, p in by_threads.items())}}))


def run_one(tmp_path, budget_mib, cpus, gencodes=GENCODES, extra=("--threads", "32")):
    nvcc, src = standin(tmp_path)
    state, out = tmp_path / "state", tmp_path / "k.o"
    config = write_config(tmp_path / "c.json", state_dir=str(state), peaks_path=str(tmp_path / "peaks.json"),
                          root=str(src), budget_bytes=budget_mib * MIB, cpus=cpus)
    finish(compile_cu(config, nvcc, src, out, gencodes, *extra))
    return events(state, "start"), out.read_text()


def key_of(gencodes, extra=("--threads", "32")):
    sys.path.insert(0, os.path.dirname(ADMISSION))
    import _admission_policy   # pylint: disable=import-error,import-outside-toplevel
    return "k.cu#" + _admission_policy.flags_id(list(extra) + list(gencodes))


def test_a_multi_arch_compile_gets_the_threads_free_memory_allows(tmp_path):
    """Learned 60 MiB at one thread: 69, 138, 207 MiB at 1-3 threads with the 1.15 margin; 1024 MiB free -> 3."""
    learned(tmp_path, key_of(GENCODES), {1: 60})
    starts, argv = run_one(tmp_path, 1024, 4)
    assert [(row["threads"], round(row["bytes"] / float(MIB))) for row in starts] == [(3, 207)], starts
    assert argv.endswith("--threads=3") and "--threads 32" not in argv, argv


def test_fewer_threads_when_memory_is_short(tmp_path):
    """The same compile in a 150 MiB budget: two threads (138 MiB) fit, three (207) do not."""
    learned(tmp_path, key_of(GENCODES), {1: 60})
    starts, argv = run_one(tmp_path, 150, 4)
    assert [(row["threads"], round(row["bytes"] / float(MIB))) for row in starts] == [(2, 138)], starts
    assert argv.endswith("--threads=2"), argv


def test_never_more_threads_than_cpus_and_the_peak_per_threads_is_learned(tmp_path):
    """cpus 2: two threads though memory is free; what the two side-by-side children held together (sampled from the
    process tree, more than one child alone) is learned as the 2-thread point of the model."""
    learned(tmp_path, key_of(GENCODES), {1: 60})
    starts, argv = run_one(tmp_path, 1024, 2)
    assert [row["threads"] for row in starts] == [2] and argv.endswith("--threads=2"), starts
    entry = json.loads((tmp_path / "peaks.json").read_text())[key_of(GENCODES)]
    assert set(entry["by_threads"]) == {"1", "2"}, entry
    assert entry["by_threads"]["2"] > 2 * 40 * MIB, entry


def test_one_arch_is_left_as_it_is(tmp_path):
    """One -gencode: nvcc --threads has nothing to run side by side; the command line is not touched, and the
    compile counts as one CPU (not 32)."""
    starts, argv = run_one(tmp_path, 1024, 4, GENCODES[:1])
    assert [row["threads"] for row in starts] == [1] and "--threads 32" in argv, (starts, argv)


def test_the_heavy_long_compile_gets_the_spare_threads_beside_a_light_one(tmp_path):
    """Two multi-arch compiles queued together on 4 CPUs: the longer (learned 300 s) starts first with 3 threads, the
    other beside it with the one CPU left."""
    nvcc, src = standin(tmp_path)
    (src / "light.cu").write_text("__global__ void l() {}\n")
    key = key_of(GENCODES)
    peaks = {key: {"peak_bytes": 60 * MIB, "seconds": 300.0, "killed": False},
             key.replace("k.cu", "light.cu"): {"peak_bytes": 60 * MIB, "seconds": 3.0, "killed": False},
             key_of(GENCODES[:1], ()): {"peak_bytes": 900 * MIB, "seconds": 5.0, "killed": False}}
    (tmp_path / "peaks.json").write_text(json.dumps(peaks))
    state = tmp_path / "state"
    config = write_config(tmp_path / "c.json", state_dir=str(state), peaks_path=str(tmp_path / "peaks.json"),
                          root=str(src), budget_bytes=1024 * MIB, cpus=4)
    # a learned 900 MiB compile holds the node (it fits only alone) for 5 s while both queue
    block = compile_cu(config, nvcc, src, tmp_path / "block.o", GENCODES[:1], ARCH_SECONDS="5")
    wait_running(state, block.pid)
    heavy = compile_cu(config, nvcc, src, tmp_path / "k.o", GENCODES, "--threads", "32")
    light = subprocess.Popen([sys.executable, ADMISSION, "--config=" + config, "--", nvcc, "--threads", "32"] + list(GENCODES) +
                             ["-c", str(src / "light.cu"), "-o", str(tmp_path / "l.o")], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True)
    finish(block, heavy, light)
    starts = [(row["source"].split("#")[0], row["threads"]) for row in events(state, "start")][1:]
    assert starts == [("k.cu", 3), ("light.cu", 1)], events(state)


NVCC_REAL = shutil.which("nvcc")
if not NVCC_REAL and os.environ.get("CI") == "true":
    raise RuntimeError("tests/build/test_admission_threads.py: nvcc missing (CI=true: failing instead of skipping)")


@pytest.mark.skipif(not NVCC_REAL, reason="needs nvcc (tests/system-deps.sh)")
def test_the_real_nvcc_runs_with_the_threads_it_was_given_and_its_peak_per_threads_is_learned(tmp_path):
    """Real nvcc, two -gencode, --threads 32 on the command line, 2 CPUs. Never seen, it runs with --threads=1 (cold:
    not two unknown cicc side by side); learned, the next build runs it with --threads=2, builds its object, and
    peaks.json keeps both points, the 2-thread one the tree's (two cicc: more than the 1-thread one)."""
    src, state = tmp_path / "src", tmp_path / "state"
    src.mkdir()
    (src / "k.cu").write_text("template <int N> __global__ void k(float *x) { x[threadIdx.x] *= N; }\n"
                              "void run(float *x) { k<1><<<1, 32>>>(x); k<2><<<1, 32>>>(x); }\n")
    config = write_config(tmp_path / "c.json", state_dir=str(state), peaks_path=str(tmp_path / "peaks.json"),
                          root=str(src), budget_bytes=4096 * MIB, cpus=2)
    for _build in range(2):
        finish(compile_cu(config, NVCC_REAL, src, tmp_path / "k.o", ["-gencode=arch=compute_90,code=sm_90",
                                                                     "-gencode=arch=compute_120a,code=sm_120a"], "--threads", "32"))
    assert [row["threads"] for row in events(state, "start")] == [1, 2] and (tmp_path / "k.o").stat().st_size > 0
    (entry,) = json.loads((tmp_path / "peaks.json").read_text()).values()
    assert set(entry["by_threads"]) == {"1", "2"} and entry["by_threads"]["2"] > 100 * MIB, entry
