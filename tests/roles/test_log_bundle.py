# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.preflight.log_bundle through ansible itself (issue 38): --check writes nothing and says what it would;
a real run keeps one bundle a person can read; a ready node gets none."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from fleetlib import run_adhoc  # noqa: E402 pylint: disable=wrong-import-position


def bundle(tmp_path, ready, *args):
    module_args = dict(dir=str(tmp_path / "bundles"), node_name="gpu1", ready=ready,
                       checks=[dict(name="fatal_xid", status="failed", message="Xid 79 on GPU 1")],
                       facts=dict(gpufleet_kernel_events=dict(xids=[dict(time="2026-12-04T20:00:00", code=79,
                                                                          pci="0000:2A:00.0", message="fallen off")])))
    result = run_adhoc("localhost", "localhost,", "gpufleet.preflight.log_bundle", module_args,
                       args=["-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable] + list(args))
    assert result.rc == 0, result.stdout + result.stderr
    return result.stdout


def test_check_mode_then_a_bundle_a_person_can_read(tmp_path):
    checked = bundle(tmp_path, False, "--check")
    assert "check mode, nothing written" in checked and not (tmp_path / "bundles").exists(), checked
    bundle(tmp_path, False)
    names = os.listdir(str(tmp_path / "bundles"))
    assert len(names) == 1 and names[0].startswith("gpufleet-bundle-gpu1-"), names
    with tarfile.open(str(tmp_path / "bundles" / names[0])) as tar:
        assert "failed fatal_xid: Xid 79 on GPU 1" in tar.extractfile("README.txt").read().decode()
        assert "Xid 79 (0000:2A:00.0): fallen off" in tar.extractfile("kernel.txt").read().decode()
        assert json.loads(tar.extractfile("verdict.json").read().decode())["ready"] is False
    ready = bundle(tmp_path, True)
    assert "ready: no bundle" in ready and len(os.listdir(str(tmp_path / "bundles"))) == 1
