# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A compiler cache never returns a stale object: real nvcc (sm_90 + sm_120a), real ccache and sccache, a real Redis.

tests/projects/twoarch_cache/src/marked.cu has a marker in host-only code and one in code only the sm_120a pass
compiles. Each edit is rebuilt through guarded_build and each new object must carry it (``strings`` on the object;
device code is uncompressed there). ccache's default mode returns the OLD object for both edits (the witness test
shows it with ccache alone); with ``ccache_dir`` as the sgl_kernel role passed it before issue 22 the build went
through ccache that way (the project adds ccache itself when CCACHE_DIR is set, as sgl-kernel's CMakeLists does).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from conftest import PROJECTS, run_module

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._compiler_cache import server_socket

TWOARCH = os.path.join(PROJECTS, "twoarch_cache")
SCCACHE = shutil.which("sccache") or shutil.which("sccache", path=os.path.dirname(sys.executable))
NEEDED = dict((name, shutil.which(name)) for name in ("nvcc", "ccache", "strings"))
NEEDED["sccache"] = SCCACHE
MISSING = sorted(name for name, path in NEEDED.items() if not path)
if MISSING and os.environ.get("CI") == "true":
    raise RuntimeError("tests/build/test_compiler_cache.py: %s missing (CI=true: failing instead of skipping; "
                       "tests/system-deps.sh and requirements-dev.txt install them)" % ", ".join(MISSING))
pytestmark = pytest.mark.skipif(bool(MISSING), reason="needs %s (tests/system-deps.sh, requirements-dev.txt)"
                                % ", ".join(MISSING))

BUILD = 'eval cmake -S . -B "$TWOARCH_BUILD" -G Ninja "$CMAKE_ARGS" >/dev/null && cmake --build "$TWOARCH_BUILD"'


def project(where):
    target = str(where)
    shutil.copytree(TWOARCH, target)
    return target


def edit(source, old, new):
    path = os.path.join(source, "src", "marked.cu")
    with open(path) as handle:
        text = handle.read()
    assert old in text
    with open(path, "w") as handle:
        handle.write(text.replace(old, new))


def markers(build):
    """The markers in the object of marked.cu and in the library."""
    found = {}
    for name, path in (("object", os.path.join(build, "CMakeFiles", "twoarch.dir", "src", "marked.cu.o")),
                       ("library", os.path.join(build, "libtwoarch.so"))):
        out = subprocess.run(["strings", path], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
        found[name] = sorted(set(word for word in out.split() if word.startswith(("HOSTMARK_", "ARCHMARK_"))))
    return found


def build(source, build_dir="build", **options):
    args = {"cmd": BUILD, "chdir": source, "build_dir": build_dir, "jobs": 2, "memory_limit": "6GiB",
            "memory_per_thread": "1GiB", "threads_variable": "", "force": True,
            "environment": {"TWOARCH_BUILD": os.path.join(source, build_dir)}}
    args.update(options)
    result = run_module(args)
    assert not result["failed"], result.get("msg") or result["_output"][-3000:]
    return result


def check_edits(source, cache_options, first=None):
    """Build, then a host-only edit, then an sm_120-only edit, each rebuilt: every object carries its edit."""
    result = first or build(source, **cache_options)
    expected = ["ARCHMARK_v0", "HOSTMARK_v0"]
    assert markers(os.path.join(source, "build")) == {"object": expected, "library": expected}
    edit(source, "HOSTMARK_v0", "HOSTMARK_v1")
    build(source, **cache_options)
    expected = ["ARCHMARK_v0", "HOSTMARK_v1"]
    assert markers(os.path.join(source, "build")) == {"object": expected, "library": expected}
    edit(source, "ARCHMARK_v0", "ARCHMARK_v1")
    rebuilt = build(source, **cache_options)
    expected = ["ARCHMARK_v1", "HOSTMARK_v1"]
    assert markers(os.path.join(source, "build")) == {"object": expected, "library": expected}
    return result, rebuilt


def test_witness_ccache_default_mode_returns_the_old_objects(tmp_path):
    """Without the module: ccache as sgl-kernel's CMakeLists uses it (CCACHE_DIR set, nothing else) keeps the
    old object after both edits - what the tests below would see without depend mode."""
    source = project(tmp_path / "src")
    env = dict(os.environ, CCACHE_DIR=str(tmp_path / "ccache"))
    for key in [key for key in env if key.startswith("CCACHE_") and key != "CCACHE_DIR"]:
        env.pop(key)
    out = str(tmp_path / "src" / "build")

    def run(*argv):
        subprocess.run(list(argv), cwd=source, env=env, stdout=subprocess.DEVNULL, check=True)
    run("cmake", "-S", ".", "-B", out, "-G", "Ninja")
    run("cmake", "--build", out)
    edit(source, "HOSTMARK_v0", "HOSTMARK_v1")
    run("cmake", "--build", out)
    assert markers(out)["object"] == ["ARCHMARK_v0", "HOSTMARK_v0"]  # stale: the host edit is lost
    edit(source, "ARCHMARK_v0", "ARCHMARK_v1")
    run("cmake", "--build", out)
    assert markers(out)["object"] == ["ARCHMARK_v0", "HOSTMARK_v0"]  # stale: the sm_120 edit is lost


@pytest.mark.parametrize("options", [
    {"ccache_dir": "CACHE"},  # what the sgl_kernel role passed before issue 22: now depend mode
    {"compiler_cache": "ccache", "compiler_cache_dir": "CACHE", "compiler_cache_max_size": "1GiB"},
], ids=["ccache_dir", "compiler_cache"])
def test_ccache_objects_carry_every_edit(tmp_path, options):
    cache = str(tmp_path / "ccache")
    options = dict((key, cache if value == "CACHE" else value) for key, value in options.items())
    source = project(tmp_path / "src")
    first, rebuilt = check_edits(source, options)
    settings = first["compiler_cache"]["settings"]
    assert first["compiler_cache"]["kind"] == "ccache" and settings["CCACHE_DEPEND"] == "1"
    assert settings["CCACHE_NOHASHDIR"] == "true" and settings["CCACHE_COMPILERCHECK"] == "content"
    assert settings["CCACHE_BASEDIR"] == source and settings["CCACHE_DIR"] == cache
    assert first["compiler_cache"]["misses"] == 2 and rebuilt["compiler_cache"]["misses"] == 1
    # a fresh build directory on a warm cache: every compile a hit, each object the latest
    fresh = build(source, build_dir="fresh", **options)
    assert (fresh["compiler_cache"]["hits"], fresh["compiler_cache"]["misses"]) == (2, 0), fresh["compiler_cache"]
    assert markers(os.path.join(source, "fresh"))["object"] == ["ARCHMARK_v1", "HOSTMARK_v1"]
    assert fresh["compiler_cache"]["size_bytes"] > 0


def test_old_ccache_refused_naming_the_version(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ccache").write_text("#!/bin/sh\necho 'ccache version 3.7.12'\n")
    (fake / "ccache").chmod(0o755)
    source = project(tmp_path / "src")
    path = "%s:%s" % (fake, os.environ["PATH"])
    result = run_module({"cmd": BUILD, "chdir": source, "jobs": 1, "memory_limit": "2GiB", "memory_per_thread": "1GiB",
                         "compiler_cache": "ccache", "environment": {"PATH": path}})
    assert result["failed"] and "ccache 4.0 or newer is needed" in result["msg"] and "3.7.12" in result["msg"]
    assert not os.path.exists(os.path.join(source, "build", "CMakeCache.txt"))  # refused before anything ran


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def redis(tmp_path):
    """A real Redis on a loopback port with a password; stopped (its pid, ours) after the test."""
    server = shutil.which("redis-server")
    if not server:
        if os.environ.get("CI") == "true":
            raise RuntimeError("redis-server missing (CI=true; tests/system-deps.sh installs it)")
        pytest.skip("redis-server is needed (tests/system-deps.sh)")
    port, password = free_port(), "fleet-secret-%d" % os.getpid()
    data = tmp_path / "redis"
    data.mkdir()
    proc = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                             "--dir", str(data), "--requirepass", password], stdin=subprocess.DEVNULL,
                            stdout=open(str(data / "log"), "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield "redis://:%s@127.0.0.1:%d/0" % (password, port), password
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def sccache_servers(build_dirs):
    """The sccache servers serving these build directories: ``sccache`` processes whose ``SCCACHE_SERVER_UDS`` is
    one of their sockets (the server's command line is only ``sccache``; other builds' servers are not ours)."""
    sockets = set(("SCCACHE_SERVER_UDS=" + server_socket(path)).encode() for path in build_dirs)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/comm" % pid) as comm, open("/proc/%s/environ" % pid, "rb") as environ:
                if comm.read().strip() == "sccache" and sockets & set(environ.read().split(b"\0")):
                    found.append(int(pid))
        except OSError:
            continue
    return found


def test_the_server_check_sees_a_live_server(tmp_path):
    """The check above can fail: a server started for a build directory is found, and gone once stopped."""
    build_dir = str(tmp_path / "build")
    env = dict(os.environ, SCCACHE_SERVER_UDS=server_socket(build_dir), SCCACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([SCCACHE, "--start-server"], env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)
    try:
        assert sccache_servers([build_dir]) and not sccache_servers([str(tmp_path / "other")])
    finally:
        subprocess.run([SCCACHE, "--stop-server"], env=env, check=False, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)
    deadline = time.time() + 10
    while sccache_servers([build_dir]) and time.time() < deadline:
        time.sleep(0.1)
    assert not sccache_servers([build_dir])


def test_sccache_shared_by_redis_never_stale_and_the_second_node_hits(tmp_path, redis):
    url, password = redis
    options = {"compiler_cache": "auto", "compiler_cache_redis": url}
    node1 = project(tmp_path / "node1" / "src")
    first, rebuilt = check_edits(node1, options)
    assert first["compiler_cache"]["kind"] == "sccache" and first["compiler_cache"]["misses"] == 2
    assert rebuilt["compiler_cache"]["misses"] == 1
    assert password not in first["_output"]  # not in the result, not in the env shown, not in the location
    assert first["compiler_cache"]["settings"]["SCCACHE_REDIS_PASSWORD"] == "********"
    # node 2: its own checkout path, build directory and server, nothing local - everything from Redis
    node2 = project(tmp_path / "node2" / "checkout")
    edit(node2, "HOSTMARK_v0", "HOSTMARK_v1")
    edit(node2, "ARCHMARK_v0", "ARCHMARK_v1")
    second = build(node2, **options)
    assert (second["compiler_cache"]["hits"], second["compiler_cache"]["misses"]) == (2, 0), second["compiler_cache"]
    assert markers(os.path.join(node2, "build"))["object"] == ["ARCHMARK_v1", "HOSTMARK_v1"]
    # and an edit only node 2 has is compiled there, not taken from the store
    edit(node2, "ARCHMARK_v1", "ARCHMARK_v2")
    third = build(node2, **options)
    assert third["compiler_cache"]["misses"] == 1
    assert markers(os.path.join(node2, "build"))["object"] == ["ARCHMARK_v2", "HOSTMARK_v1"]
    builds = [os.path.join(node, "build") for node in (node1, node2)]
    assert not sccache_servers(builds), "an sccache server outlived its build"


def test_sccache_shared_directory(tmp_path):
    """The other shared store: one directory (a shared filesystem on a fleet) for two nodes' builds."""
    shared = str(tmp_path / "shared-sccache")
    options = {"compiler_cache": "sccache", "compiler_cache_dir": shared, "compiler_cache_max_size": "1GiB"}
    node1 = project(tmp_path / "node1")
    check_edits(node1, options)
    node2 = project(tmp_path / "node2")
    edit(node2, "HOSTMARK_v0", "HOSTMARK_v1")
    edit(node2, "ARCHMARK_v0", "ARCHMARK_v1")
    second = build(node2, **options)
    assert (second["compiler_cache"]["hits"], second["compiler_cache"]["misses"]) == (2, 0), second["compiler_cache"]
    assert second["compiler_cache"]["max_size_bytes"] == 1 << 30
    assert markers(os.path.join(node2, "build"))["object"] == ["ARCHMARK_v1", "HOSTMARK_v1"]
