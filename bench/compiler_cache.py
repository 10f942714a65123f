# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the compiler cache saves a build (issue 22), with real nvcc (sm_90 + sm_120a) through guarded_build.

The library is tests/projects/twoarch_cache plus ``GPUFLEET_BENCH_CACHE_SOURCES`` generated kernels of the same kind
(each its own .cu with a host part and an sm_120-only part). Every build is configure + build through
``GuardedBuild`` (as the sgl_kernel role's wheel build configures each time), timed by the module (``duration``):

1. no cache - the baseline;
2. cold - an empty cache (the cache's overhead on a miss);
3. nothing changed - ninja's no-op (the cache is not asked);
4. one file edited - one compile, the rest untouched by ninja;
5. a fresh build directory with a warm cache - every compile asked, all hits (depend mode + NOHASHDIR + BASEDIR);
6. a second node - another checkout path and build directory, its own server, nothing local: through the shared store.

ccache (local directory; the second node shares it, as a shared filesystem would) and sccache (a real Redis on a
loopback port, the fleet's store). Ratios to the cold build without a cache, hit rates from the module's result,
disk use (``du`` of the cache directory; Redis: ``used_memory``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import socket
import subprocess
import tempfile
import time

import benchlib
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._guarded_build import GuardedBuild
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import find_executable, run_with_timeout, search_path
from ansible_collections.gpufleet.preflight.plugins.modules.guarded_build import ARGUMENT_SPEC

TWOARCH = os.path.join(benchlib.REPO_ROOT, "tests", "projects", "twoarch_cache")
BUILD = 'eval cmake -S . -B "$TWOARCH_BUILD" -G Ninja "$CMAKE_ARGS" >/dev/null && cmake --build "$TWOARCH_BUILD"'
KERNEL = """// generated for bench/compiler_cache.py
#include <cstdio>
#ifndef __CUDA_ARCH__
const char *bench_host_%(n)d() { return "host %(n)d"; }
#endif
__global__ void bench_kernel_%(n)d(float *y, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
  if (i == 0) printf("sm120 %(n)d\\n");
#endif
  float v = x[i];
  for (int k = 0; k < %(loops)d; ++k) v = v * a + (float)k;
  if (i < n) y[i] = v;
}
void bench_launch_%(n)d(float *y, const float *x, float a, int n) { bench_kernel_%(n)d<<<(n + 255) / 256, 256>>>(y, x, a, n); }
"""


def project(where, sources):
    shutil.copytree(TWOARCH, where)
    extra = os.path.join(where, "extra")
    os.mkdir(extra)
    for index in range(sources):
        with open(os.path.join(extra, "k%02d.cu" % index), "w") as handle:
            handle.write(KERNEL % {"n": index, "loops": 8 + index})
    return where


def find(name, env):
    return find_executable(name, search_path([], environ=env))


def build(source, build_dir, **options):
    params = dict((name, spec.get("default")) for name, spec in ARGUMENT_SPEC.items())
    params.update(cmd=BUILD, chdir=source, build_dir=build_dir, name="cache-bench", jobs=2, memory_limit="6GiB",
                  memory_per_thread="1GiB", threads_variable="", force=True, artifacts=[],
                  environment={"TWOARCH_BUILD": os.path.join(source, build_dir),
                               "TWOARCH_EXTRA_SOURCES": os.path.join(source, "extra", "*.cu")})
    params.update(options)
    result = GuardedBuild(params, run_with_timeout, find).execute()
    return result["duration"], result.get("compiler_cache") or {}


def du_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


class Redis(object):
    """A real redis-server on a loopback port (ours: stopped by pid)."""

    def __init__(self, directory):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.password = "bench-%d" % os.getpid()
        self.log = open(os.path.join(directory, "redis.log"), "w")
        self.proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                                      "--appendonly", "no", "--dir", directory, "--requirepass", self.password],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise benchlib.BenchFailure("redis-server did not listen on 127.0.0.1:%d" % self.port)

    def url(self):
        return "redis://:%s@127.0.0.1:%d/0" % (self.password, self.port)

    def used_memory(self):
        out = subprocess.run(["redis-cli", "-p", str(self.port), "--no-auth-warning", "-a", self.password, "info",
                              "memory"], stdout=subprocess.PIPE, universal_newlines=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("used_memory:"):
                return int(line.split(":")[1])
        return None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def edit(source):
    path = os.path.join(source, "src", "marked.cu")
    with open(path) as handle:
        text = handle.read()
    with open(path, "w") as handle:
        handle.write(text.replace("HOSTMARK_v0", "HOSTMARK_v1"))


def scenarios(directory, kind, options, sources, disk):
    """The six builds for one cache -> rows [(scenario, seconds, cache result)] and the disk use."""
    node1 = project(os.path.join(directory, kind, "node1", "src"), sources)
    rows = [("cold, empty cache", ) + build(node1, "build", **options),
            ("nothing changed", ) + build(node1, "build", **options)]
    edit(node1)
    rows.append(("one file edited", ) + build(node1, "build", **options))
    rows.append(("fresh build dir, warm cache", ) + build(node1, "fresh", **options))
    node2 = project(os.path.join(directory, kind, "node2", "checkout"), sources)
    edit(node2)
    rows.append(("second node, shared store", ) + build(node2, "build", **options))
    return rows, disk()


def main():
    info = benchlib.machine()
    sources = benchlib.env_int("GPUFLEET_BENCH_CACHE_SOURCES", 10, 2)
    missing = [name for name in ("nvcc", "cmake", "ninja", "ccache", "redis-server", "redis-cli")
               if not shutil.which(name)]
    sccache = shutil.which("sccache") or shutil.which("sccache", path=os.path.join(benchlib.REPO_ROOT, ".venv", "bin"))
    if missing or not sccache:
        raise benchlib.BenchFailure("needs %s" % ", ".join(missing + ([] if sccache else ["sccache"])))
    directory = tempfile.mkdtemp(prefix="gpufleet-cache-bench-")
    redis = None
    try:
        os.chmod(directory, 0o700)
        baseline_src = project(os.path.join(directory, "none", "src"), sources)
        cold, dummy = build(baseline_src, "build", compiler_cache="none")
        ccache_dir = os.path.join(directory, "ccache")
        ccache_rows, ccache_disk = scenarios(directory, "ccache", {"compiler_cache": "ccache",
                                                                   "compiler_cache_dir": ccache_dir},
                                             sources, lambda: du_bytes(ccache_dir))
        redis = Redis(directory)
        path = os.path.dirname(sccache) + ":" + os.environ.get("PATH", os.defpath)
        sccache_options = {"compiler_cache": "sccache", "compiler_cache_redis": redis.url()}
        os.environ["PATH"] = path
        sccache_rows, sccache_disk = scenarios(directory, "sccache", sccache_options, sources, redis.used_memory)
    finally:
        if redis is not None:
            redis.stop()
        shutil.rmtree(directory, ignore_errors=True)
    rows = [["no cache", "cold", "%.1f s" % cold, "1.00", "-", "-"]]
    data = {"sources": sources + 2, "cold_uncached_seconds": cold, "ccache": [], "sccache": []}
    for kind, found, disk in (("ccache", ccache_rows, ccache_disk), ("sccache", sccache_rows, sccache_disk)):
        for label, seconds, cache in found:
            compiles = cache.get("compiles")
            rows.append([kind, label, "%.1f s" % seconds, "%.2f" % (seconds / cold),
                         "%s of %s" % (cache.get("hits"), compiles) if compiles else "- (nothing compiled)",
                         "%s%%" % round(100 * cache["hit_rate"]) if cache.get("hit_rate") is not None else "-"])
            data[kind].append({"scenario": label, "seconds": seconds, "ratio": seconds / cold,
                               "hits": cache.get("hits"), "misses": cache.get("misses"), "hit_rate": cache.get("hit_rate"),
                               "steps": cache.get("steps")})
        data[kind + "_disk_bytes"] = disk
    table = benchlib.markdown_table(["cache", "build", "time (configure + build)", "ratio to cold, no cache",
                                     "compiles from the cache", "hit rate"], rows)
    fresh = dict((kind, [r for r in data[kind] if r["scenario"].startswith("fresh")][0]) for kind in ("ccache", "sccache"))
    second = dict((kind, [r for r in data[kind] if r["scenario"].startswith("second")][0]) for kind in ("ccache", "sccache"))
    targets = [
        ("a fresh build dir on a warm cache: every compile a hit (ccache, sccache)",
         fresh["ccache"]["hit_rate"] == 1.0 and fresh["sccache"]["hit_rate"] == 1.0,
         "ccache %s, sccache %s" % (fresh["ccache"]["hit_rate"], fresh["sccache"]["hit_rate"])),
        ("a second node through the shared store: mostly hits (all but the edited file's when it differs)",
         (second["sccache"]["hit_rate"] or 0) >= 0.5 and (second["ccache"]["hit_rate"] or 0) >= 0.5,
         "ccache %s, sccache %s" % (second["ccache"]["hit_rate"], second["sccache"]["hit_rate"])),
    ]
    notes = ["%d CUDA sources (twoarch_cache's 2 + %d generated), each for sm_90 and sm_120a, jobs=2, one nvcc thread"
             % (sources + 2, sources),
             "times include CMake's configure (a fresh build dir's configure probes nvcc: several seconds of the "
             "warm-cache builds are that)",
             "disk: ccache directory %s (du), Redis used_memory %s after both nodes" % (
                 human(data["ccache_disk_bytes"]), human(data["sccache_disk_bytes"])),
             "sccache counts whole compiles; its per-architecture steps (device code, PTX, cubin) are cached too"]
    return benchlib.report("compiler_cache", "What the compiler cache saves a build (issue 22)", info, table, notes,
                           data, targets)


if __name__ == "__main__":
    benchlib.main_wrapper(main)
