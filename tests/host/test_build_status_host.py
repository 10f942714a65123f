# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""build_status, run as a real module against what a build dir may hold instead of a status file (issue 18
findings 9 and 11): a FIFO never hangs it, a 100 MB file is not read, and the answer names the file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from conftest import run_plugin_module


@pytest.fixture
def build_dir(tmp_path):
    path = tmp_path / "build"
    path.mkdir()
    return path


def status_path(build_dir):
    return str(build_dir / "gpufleet-build.status.json")


@pytest.mark.parametrize("make, words", [
    (os.mkfifo, "is not a regular file (a FIFO)"),
    (os.mkdir, "is not a regular file (a directory)"),
    (lambda p: os.symlink("/etc/hostname", p), "is a symbolic link"),
    (lambda p: open(p, "w").write("{not json"), "is not JSON"),
    (lambda p: open(p, "wb").write(b"\xff\xfe{}"), "is not JSON"),
])
def test_what_is_not_a_status_file_is_named_and_never_hangs(tmp_path, build_dir, make, words):
    path = status_path(build_dir)
    make(path)
    result, seconds = run_plugin_module("build_status", {"path": path}, tmp_path, timeout=30)
    assert not result.get("failed"), result
    assert result["status"] is None and result["exists"] is True
    assert result["error"].startswith(path) and words in result["error"], result["error"]
    assert seconds < 20


def test_a_huge_status_file_is_not_read(tmp_path, build_dir):
    path = status_path(build_dir)
    with open(path, "wb") as handle:
        handle.write(b'{"state": "running", "timeline": [')
        handle.write(b"[0, 1, 2, 1], " * (100 * 1024 * 1024 // 14))
        handle.write(b"[0, 1, 2, 1]]}")
    result, seconds = run_plugin_module("build_status", {"path": path}, tmp_path, timeout=30)
    assert result["status"] is None and "more than the 1048576 a status file may be: not read" in result["error"]
    assert result["size"] > 100 * 1024 * 1024
    assert seconds < 20


def test_a_status_file_and_its_absence(tmp_path, build_dir):
    path = status_path(build_dir)
    result, _seconds = run_plugin_module("build_status", {"path": path}, tmp_path)
    assert result["exists"] is False and result["status"] is None and result["error"] is None
    with open(path, "w") as handle:
        json.dump([1], handle)
    result, _seconds = run_plugin_module("build_status", {"path": path}, tmp_path)
    assert result["status"] == [1] and result["error"] is None, "the shape is the controller's to check"
    with open(path, "w") as handle:
        json.dump({"state": "running", "run_id": "n1-2"}, handle)
    result, _seconds = run_plugin_module("build_status", {"path": path, "max_bytes": 4096}, tmp_path)
    assert result["status"] == {"state": "running", "run_id": "n1-2"}


@pytest.mark.parametrize("args, words", [
    ({"path": "build/gpufleet-build.status.json"}, "path: 'build/gpufleet-build.status.json' is not an absolute path"),
    ({"path": "/x", "max_bytes": 0}, "max_bytes must be between 4096 and 67108864, got 0"),
    ({"path": "/x", "max_bytes": 1 << 40}, "max_bytes must be between"),
])
def test_bad_options_are_named(tmp_path, args, words):
    result, _seconds = run_plugin_module("build_status", args, tmp_path)
    assert result.get("failed") is True and result["msg"].startswith(words), result
