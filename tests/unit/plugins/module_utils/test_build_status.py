# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/_build/_build_status.py: a status file read without ever blocking, on real files of every kind."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_status


def test_a_status_file_is_parsed(tmp_path):
    path = tmp_path / "status.json"
    path.write_text(json.dumps({"state": "running", "step": [3, 9]}))
    found = _build_status.read_status(str(path))
    assert found == {"exists": True, "size": path.stat().st_size, "status": {"state": "running", "step": [3, 9]}, "error": None}


def test_a_missing_file_is_not_yet_written(tmp_path):
    assert _build_status.read_status(str(tmp_path / "nope" / "status.json")) == {
        "exists": False, "size": None, "status": None, "error": None}


def _fifo(path):
    os.mkfifo(str(path))


def _socket(path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    return server


@pytest.mark.parametrize("make, said", [
    (lambda p: p.mkdir(), "is not a regular file (a directory)"),
    (_fifo, "is not a regular file (a FIFO)"),
    (_socket, "/status.json: "),
    (lambda p: p.symlink_to("/etc/hostname"), "is a symbolic link"),
    (lambda p: p.write_bytes(b"\xff\xfe not json"), "is not JSON"),
    (lambda p: p.write_text("{" * 10), "is not JSON"),
])
def test_what_cannot_be_a_status_file_is_named_and_never_blocks(tmp_path, make, said):
    path = tmp_path / "status.json"
    made = make(path)
    try:
        found = _build_status.read_status(str(path))
    finally:
        if hasattr(made, "close"):
            made.close()
    assert found["exists"] and found["status"] is None
    assert said in found["error"] and str(path) in found["error"]


def test_a_file_over_the_limit_is_not_read(tmp_path):
    path = tmp_path / "status.json"
    path.write_text(json.dumps({"pad": "x" * 10000}))
    found = _build_status.read_status(str(path), max_bytes=4096)
    assert found["status"] is None and found["size"] > 4096
    assert "more than the 4096 a status file may be: not read" in found["error"]
