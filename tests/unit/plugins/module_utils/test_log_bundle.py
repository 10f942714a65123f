# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The log bundle kept on the node (issue 38, the remediation ladder's first step): contents, names, pruning,
check mode."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import stat
import tarfile

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _log_bundle

WHEN = 1796420100.0   # 2026-12-04T21:35:00Z
FACTS = {"kernel_events": {"xids": [{"time": "2026-12-04T20:00:00", "code": 79, "pci": "0000:2A:00.0",
                                     "message": "GPU has fallen off the bus."}],
                           "oom_kills": [{"time": "2026-12-04T19:00:00", "message": "Killed process 42 (cicc)"}],
                           "sxids": []},
         "gpus": {"probes": {"q": {"state": "timeout"}}}, "memory": {"effective": {"available_bytes": 1}}}
CHECKS = [dict(name="fatal_xid", status="failed", message="Xid 79 on GPU 1"), dict(name="gpu_count", status="ok", message="8")]


# node, expected name
NAMES = [("gpu1", "gpufleet-bundle-gpu1-20261204T213500Z.tar.gz"),
         ("a/b c", "gpufleet-bundle-a_b_c-20261204T213500Z.tar.gz"),
         ("", "gpufleet-bundle-node-20261204T213500Z.tar.gz")]


@pytest.mark.parametrize("node, expected", NAMES)
def test_bundle_name(node, expected):
    assert _log_bundle.bundle_name(node, WHEN) == expected


def test_kernel_lines_oldest_first():
    assert _log_bundle.kernel_lines(FACTS) == [
        "2026-12-04T19:00:00 OOM kill: Killed process 42 (cicc)",
        "2026-12-04T20:00:00 Xid 79 (0000:2A:00.0): GPU has fallen off the bus."]
    assert _log_bundle.kernel_lines({}) == []


def test_contents_name_every_file_and_the_failure():
    items = dict(_log_bundle.contents("gpu1", False, CHECKS, FACTS, WHEN))
    assert sorted(items) == ["README.txt", "facts.json", "kernel.txt", "probes.json", "verdict.json"]
    readme = items["README.txt"].decode()
    assert "failed fatal_xid: Xid 79 on GPU 1" in readme and "gpu_count" not in readme and "not ready" in readme
    assert json.loads(items["facts.json"].decode())["memory"]["effective"]["available_bytes"] == 1
    assert json.loads(items["probes.json"].decode()) == {"q": {"state": "timeout"}}


# existing names, keep, pruned
PRUNE = [
    (["gpufleet-bundle-n-20261201T000000Z.tar.gz", "gpufleet-bundle-n-20261202T000000Z.tar.gz",
      "gpufleet-bundle-n-20261203T000000Z.tar.gz"], 2, ["gpufleet-bundle-n-20261201T000000Z.tar.gz"]),
    (["gpufleet-bundle-n-20261201T000000Z.tar.gz", "notes.txt", "gpufleet-bundle-evil.tar.gz"], 0,
     ["gpufleet-bundle-n-20261201T000000Z.tar.gz"]),                   # never another file
    ([], 3, []),
]


@pytest.mark.parametrize("names, keep, pruned", PRUNE)
def test_to_prune(names, keep, pruned):
    assert _log_bundle.to_prune(names, keep) == pruned


def test_write_keeps_the_newest_and_check_mode_writes_nothing(tmp_path):
    directory = str(tmp_path / "bundles")
    items = _log_bundle.contents("gpu1", False, CHECKS, FACTS, WHEN)
    checked = _log_bundle.write(directory, "gpu1", items, keep=2, check_mode=True, when=WHEN)
    assert checked["changed"] and "check mode" in checked["message"] and not os.path.exists(directory)
    paths = [_log_bundle.write(directory, "gpu1", items, keep=2, when=WHEN + step)["path"] for step in range(3)]
    assert sorted(os.listdir(directory)) == sorted(os.path.basename(p) for p in paths[1:])
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700 and stat.S_IMODE(os.stat(paths[2]).st_mode) == 0o600
    with tarfile.open(paths[2]) as tar:
        assert "Xid 79" in tar.extractfile("kernel.txt").read().decode()
    with pytest.raises(OSError):   # never over an existing file
        _log_bundle.write(directory, "gpu1", items, keep=2, when=WHEN + 2)


def test_tar_bytes_round_trip():
    data = _log_bundle.tar_bytes([("a.txt", b"x")], WHEN)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert tar.extractfile("a.txt").read() == b"x"
