# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One build directory, two spellings that no path resolution unifies: the checkout bind-mounted elsewhere. The
build lock must be the same for both (a second guarded_build through the bind mount ran beside the first in the
same build dir and replaced its status). The bind mount lives in a private mount namespace (`unshare -m`) and
disappears with it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="a bind mount in a private mount namespace needs root and unshare")

SCRIPT = r"""
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_state as state
import sys
checkout, bound, registry = sys.argv[1:4]
held = state.BuildLock(checkout + "/build", directory=registry).acquire({"module_pid": 1, "run_id": "first"})
try:
    state.BuildLock(bound + "/build", directory=registry).acquire({"module_pid": 2, "run_id": "second"})
    print("SECOND RAN")
except state.StateError as exc:
    print("REFUSED: %s" % exc)
held.release()
"""


def test_a_bind_mount_of_the_checkout_is_the_same_build(tmp_path):
    checkout, bound, registry = tmp_path / "checkout", tmp_path / "bound", tmp_path / "registry"
    for path in (checkout, bound):
        path.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path for path in sys.path if path))
    run = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", 'mount --bind "$1" "$2" && shift 2 && exec "$@"',
         "bind", str(checkout), str(bound), sys.executable, "-c", SCRIPT, str(checkout), str(bound), str(registry)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert run.returncode == 0, run.stdout
    assert "REFUSED: another build holds" in run.stdout and "module pid 1 (run first" in run.stdout, run.stdout
    assert not os.path.ismount(str(bound))
