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


def test_the_preflight_keeps_a_bundle_of_a_node_that_is_not_ready(tmp_path):
    """preflight_bundle_dir: a node that fails its check keeps a bundle; --check keeps none."""
    from fleetlib import REPO_ROOT, run_playbook  # pylint: disable=import-outside-toplevel
    extra = dict(ansible_python_interpreter=sys.executable, ansible_connection="local", preflight_hosts="localhost",
                 preflight_profiles=[], preflight_max_memory_pressure=100, preflight_max_build_processes=100000,
                 preflight_min_available_memory="1024TiB", preflight_write_reports=False,
                 preflight_drop_mode="end_host", preflight_bundle_dir=str(tmp_path / "kept"))
    playbook = os.path.join(REPO_ROOT, "playbooks", "preflight.yml")
    checked = run_playbook(playbook, "localhost,", extra_vars=extra, args=["--check"])
    assert "check mode, nothing written" in checked.stdout or not (tmp_path / "kept").exists(), checked.stdout[-3000:]
    assert not (tmp_path / "kept").exists()
    run_playbook(playbook, "localhost,", extra_vars=extra)
    names = os.listdir(str(tmp_path / "kept"))
    assert len(names) == 1, names
    with tarfile.open(str(tmp_path / "kept" / names[0])) as tar:
        assert "available_memory" in tar.extractfile("README.txt").read().decode()
