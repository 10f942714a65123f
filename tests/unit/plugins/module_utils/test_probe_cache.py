# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/_probe_cache.py: version probes remembered by the binary's identity, on real files."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils import _probe_cache


class Counting(object):
    def __init__(self, rc=0):
        self.calls, self.rc = [], rc

    def __call__(self, argv, timeout, env=None, cwd=None, data=None):
        self.calls.append(list(argv))
        return self.rc, "%s 1.2.3\n" % os.path.basename(argv[0]), ""


def tool(tmp_path, name="cmake", text="#!/bin/sh\necho 1\n"):
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("tail, cached", [
    (["--version"], True), (["--list-gpu-arch"], True), (["-dumpfullversion"], True),
    (["-c", "import torch"], False), (["--query-gpu=name"], False), ([], False), (["--version", "x"], False)])
def test_only_version_probes_qualify(tmp_path, tail, cached):
    assert (_probe_cache.probe_key([tool(tmp_path)] + tail) is not None) is cached


def test_a_relative_or_missing_binary_is_never_cached(tmp_path):
    assert _probe_cache.probe_key(["cmake", "--version"]) is None
    assert _probe_cache.probe_key([str(tmp_path / "gone"), "--version"]) is None


def test_a_probe_runs_once_until_the_binary_changes(tmp_path):
    binary, cache = tool(tmp_path), str(tmp_path / "probes.json")
    inner = Counting()
    first = _probe_cache.CachedRun(inner, cache)
    assert first([binary, "--version"], 5) == (0, "cmake 1.2.3\n", "")
    first.save()
    second = _probe_cache.CachedRun(inner, cache)
    assert second([binary, "--version"], 5) == (0, "cmake 1.2.3\n", "") and second.hits == 1
    assert len(inner.calls) == 1
    with open(binary, "a") as handle:        # an upgrade: another size and mtime
        handle.write("# 2.0\n")
    third = _probe_cache.CachedRun(inner, cache)
    third([binary, "--version"], 5)
    assert len(inner.calls) == 2 and third.misses == 1


def test_a_failed_probe_is_not_remembered(tmp_path):
    binary, cache = tool(tmp_path), str(tmp_path / "probes.json")
    inner = Counting(rc=1)
    run = _probe_cache.CachedRun(inner, cache)
    run([binary, "--version"], 5)
    run.save()
    assert not os.path.exists(cache)


def test_a_symlinked_tool_is_keyed_by_what_it_points_to(tmp_path):
    real = tool(tmp_path, "nvcc-13.0")
    link = tmp_path / "nvcc"
    link.symlink_to(real)
    assert _probe_cache.probe_key([str(link), "--version"]).startswith(real + " --version|")


@pytest.mark.parametrize("plant", ["fifo", "symlink", "garbage", "list", "wrong_shape", "huge"])
def test_a_bad_cache_file_is_an_empty_cache_and_never_blocks(tmp_path, plant):
    cache = tmp_path / "probes.json"
    if plant == "fifo":
        os.mkfifo(str(cache))
    elif plant == "symlink":
        (tmp_path / "elsewhere.json").write_text(json.dumps({"k": [0, "x", ""]}))
        cache.symlink_to(tmp_path / "elsewhere.json")
    elif plant == "garbage":
        cache.write_bytes(b"\xff{{")
    elif plant == "list":
        cache.write_text("[1, 2]")
    elif plant == "wrong_shape":
        cache.write_text(json.dumps({"k": [1, "x", ""], "j": "text", "m": [0, 5, ""]}))
    else:
        cache.write_text(json.dumps({"k": [0, "x" * (_probe_cache.MAX_BYTES + 1), ""]}))
    assert _probe_cache.load(str(cache)) == {}


def test_the_cache_is_written_atomically_and_bounded(tmp_path):
    cache = str(tmp_path / "probes.json")
    table = dict(("k%03d" % i, [0, "v", ""]) for i in range(200))
    _probe_cache.save(cache, table)
    loaded = _probe_cache.load(cache)
    assert len(loaded) == _probe_cache.MAX_ENTRIES
    assert [name for name in os.listdir(str(tmp_path)) if name.startswith(".probes-")] == []


def test_nvidia_smi_is_never_cached_it_reads_the_loaded_driver(tmp_path):
    """A driver that stopped answering (a mismatch after an upgrade) must fail every run, not answer from a file."""
    assert _probe_cache.probe_key([tool(tmp_path, "nvidia-smi"), "--version"]) is None
    assert _probe_cache.probe_key([tool(tmp_path, "nvcc"), "--version"]) is not None


@pytest.mark.parametrize("environ, home, path", [
    ({"XDG_CACHE_HOME": "/x/cache"}, "/home/u", "/x/cache/gpufleet-preflight/node-facts-probes.json"),
    ({"XDG_CACHE_HOME": ""}, "/home/u", "/home/u/.cache/gpufleet-preflight/node-facts-probes.json"),
    ({}, "/root", "/root/.cache/gpufleet-preflight/node-facts-probes.json"),
])
def test_node_facts_keeps_its_probes_in_the_users_cache_directory(environ, home, path):
    assert _probe_cache.user_cache_path(environ=environ, home=home) == path


def test_save_makes_a_private_directory_only_when_asked(tmp_path):
    binary, cache = tool(tmp_path), str(tmp_path / "cache" / "gpufleet-preflight" / "probes.json")
    run = _probe_cache.CachedRun(Counting(), cache)
    run([binary, "--version"], 5)
    run.save()
    assert not os.path.exists(os.path.dirname(cache))            # the health check's rule: no directory, no cache
    run.save(make_dir=True)
    assert _probe_cache.load(cache) and os.stat(os.path.dirname(cache)).st_mode & 0o777 == 0o700


def test_the_toolchain_is_probed_once_then_answered_from_the_cache(tmp_path):
    """Real cmake, gcc, ninja and nvcc through the toolchain collector twice: the second time no version probe runs,
    and the facts are the same."""
    from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._toolchain import collect_toolchain
    from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout, search_path

    class Recording(object):
        def __init__(self):
            self.calls = []

        def __call__(self, argv, timeout, env=None, cwd=None, data=None):
            self.calls.append(os.path.basename(argv[0]) + " " + " ".join(argv[1:]))
            return run_with_timeout(argv, timeout, env=env, cwd=cwd, data=data)

    cache, dirs = str(tmp_path / "probes.json"), search_path(("/usr/local/cuda/bin", "/usr/local/bin", "/usr/bin"))
    first_calls, second_calls = Recording(), Recording()
    first = _probe_cache.CachedRun(first_calls, cache)
    cold = collect_toolchain(first, search_paths=dirs)
    first.save()
    warm = collect_toolchain(_probe_cache.CachedRun(second_calls, cache), search_paths=dirs)
    assert "cmake --version" in first_calls.calls and "nvcc --list-gpu-arch" in first_calls.calls, first_calls.calls
    assert cold["cmake"]["version"] and cold["nvcc"]["gpu_codes"], cold
    assert [call for call in second_calls.calls if call.split()[1:] and call.split()[1] in _probe_cache.VERSION_FLAGS] == []
    for name in ("cmake", "ninja", "nvcc", "gcc", "gxx", "ccache", "git"):
        assert warm[name] == cold[name], name


def test_a_killed_runs_temp_file_is_removed_once_it_is_an_hour_old(tmp_path):
    """Killed between writing and renaming (slurmd kills a health check at 60 s), a run leaves ``.probes-*``
    behind: the next run that writes removes it once stale, and leaves a fresh one (another run's, writing now)."""
    stale, fresh = tmp_path / ".probes-stale", tmp_path / ".probes-fresh"
    stale.write_text("{")
    fresh.write_text("{")
    old = os.stat(str(stale)).st_mtime - _probe_cache.STALE_TEMP_SECONDS - 60
    os.utime(str(stale), (old, old))
    binary, cache = tool(tmp_path), str(tmp_path / "probes.json")
    run = _probe_cache.CachedRun(Counting(), cache)
    run([binary, "--version"], 5)
    run.save()
    assert sorted(name for name in os.listdir(str(tmp_path)) if name.startswith(".probes-")) == [".probes-fresh"]
    assert _probe_cache.load(cache)


def test_a_same_size_rewrite_with_its_mtime_put_back_is_a_new_binary(tmp_path):
    """Rewritten in place (same inode), same size, mtime restored with utime: path, inode, size and mtime all match;
    the change time cannot be set back, so the old answer is not given."""
    binary, cache = tool(tmp_path, text="#!/bin/sh\necho 1\n"), str(tmp_path / "probes.json")
    inner = Counting()
    first = _probe_cache.CachedRun(inner, cache)
    first([binary, "--version"], 5)
    first.save()
    before = os.stat(binary)
    time.sleep(0.02)
    with open(binary, "r+") as handle:
        handle.write("#!/bin/sh\necho 2\n")
    os.utime(binary, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(binary)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    second = _probe_cache.CachedRun(inner, cache)
    second([binary, "--version"], 5)
    assert len(inner.calls) == 2 and second.misses == 1
