# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 28 item 8, with real directories and the real module: a compiler cache directory owned by another user
(``nobody``), one of mode 0777 (sticky or not), one holding another user's subdirectory, and one under a directory
everyone may rename it in are refused naming what to fix; ``compiler_cache_dir_policy=warn`` builds with a warning;
the build user's own 0755 directory is used."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil

import pytest

from conftest import run_module

NOBODY = 65534
pytestmark = [pytest.mark.skipif(not shutil.which("ccache"), reason="needs ccache"),
              pytest.mark.skipif(os.geteuid() != 0, reason="another user's directory needs root to make")]


def build(tmp_path, cache, **extra):
    chdir = tmp_path / "project"
    chdir.mkdir(exist_ok=True)
    args = {"cmd": "true", "chdir": str(chdir), "jobs": 1, "memory_limit": "256MiB", "memory_per_thread": "16MiB",
            "confinement": "none", "compiler_cache": "ccache", "compiler_cache_dir": str(cache), "force": True}
    args.update(extra)
    return run_module(args, timeout=120)


def refused(result, *words):
    assert result.get("failed"), result["_output"]
    assert "code in every wheel" in result["msg"] and "compiler_cache_dir_policy=warn" in result["msg"], result["msg"]
    for word in words:
        assert word in result["msg"], result["msg"]


def test_another_users_cache_directory_is_refused(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chown(str(cache), NOBODY, NOBODY)
    refused(build(tmp_path, cache), "%s is owned by uid %d, not by the build's user (uid 0)" % (cache, NOBODY))


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o775])
def test_a_cache_directory_others_may_write_is_refused(tmp_path, mode):
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(str(cache), mode)
    refused(build(tmp_path, cache), "%s is writable by %s (mode %04o)" % (
        cache, "everyone" if mode & 0o002 else "its group", mode))


def test_another_users_entry_in_the_cache_is_refused(tmp_path):
    cache = tmp_path / "cache"
    (cache / "a").mkdir(parents=True)
    os.chown(str(cache / "a"), NOBODY, NOBODY)  # a subdirectory ccache would write objects into
    refused(build(tmp_path, cache), "holds %s, owned by uid %d" % (cache / "a", NOBODY))


def test_a_cache_under_a_directory_everyone_may_rename_in_is_refused(tmp_path):
    shared = tmp_path / "shared"
    (shared / "cache").mkdir(parents=True)
    os.chmod(str(shared), 0o777)
    refused(build(tmp_path, shared / "cache"), "%s, above the cache, is writable by everyone without the sticky bit"
            % shared)


def test_warn_builds_with_an_unsafe_cache_and_says_so(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(str(cache), 0o777)
    result = build(tmp_path, cache, compiler_cache_dir_policy="warn")
    assert not result.get("failed"), result["_output"]
    assert "compiler_cache_dir_policy=warn: building with it anyway" in result["_output"]
    assert any("is writable by everyone (mode 0777)" in note for note in result["compiler_cache"]["notes"])


def test_the_build_users_own_directory_is_used(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(str(cache), 0o755)
    result = build(tmp_path, cache)
    assert not result.get("failed"), result["_output"]
    assert result["compiler_cache"]["kind"] == "ccache" and "[WARNING]" not in result["_output"]
    missing = build(tmp_path, tmp_path / "new-cache")  # made by ccache itself: its parents are checked
    assert not missing.get("failed"), missing["_output"]
