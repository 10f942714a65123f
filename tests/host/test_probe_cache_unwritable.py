# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_facts' version-probe cache where it cannot be written: a read-only file system, a full one, and a file
where its directory would go. The facts come back whole, without a traceback, and nothing is left behind.

Each cache home is a real tmpfs mounted in a private mount namespace (`unshare -m`), gone with the namespace.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="mounting a tmpfs in a private mount namespace needs root and unshare")

SCRIPTS = {
    # its directory there already, the file system read-only since (a container's image, a remount): mkstemp fails
    "read-only": 'mount -t tmpfs -o size=64k gpufleet-ro "$1" && mkdir -p "$1/gpufleet-preflight" && '
                 'mount -o remount,ro "$1"',
    "full": 'mount -t tmpfs -o size=64k gpufleet-full "$1" && mkdir -p "$1/gpufleet-preflight" && '
            '(dd if=/dev/zero of="$1/filler" bs=4k 2>/dev/null || true)',
    "a file in the way": 'mount -t tmpfs -o size=64k gpufleet-file "$1" && echo not-a-directory > "$1/gpufleet-preflight"',
}
RUN = r"""
set -e
%s
shift
set +e
XDG_CACHE_HOME="$CACHE_HOME" "$@"
echo "ansible rc=$?"
echo "--- left in the cache home:"
ls -A "$CACHE_HOME" "$CACHE_HOME/gpufleet-preflight" 2>&1
true
"""


@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_an_unwritable_probe_cache_costs_only_the_cache(tmp_path, case):
    home = tmp_path / "cache-home"
    home.mkdir()
    env = dict(os.environ, CACHE_HOME=str(home), ANSIBLE_NOCOLOR="1")
    run = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", RUN % SCRIPTS[case], "probe-cache", str(home),
         "ansible", "localhost", "-m", "gpufleet.preflight.node_facts", "-a", "gather_subset=toolchain"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    out = run.stdout
    assert run.returncode == 0 and "ansible rc=0" in out, out
    assert "Traceback" not in out, out
    assert "localhost | SUCCESS => {" in out, out
    result = json.loads(out[out.index("SUCCESS => ") + len("SUCCESS => "):out.rindex("ansible rc=")])
    toolchain = result["ansible_facts"]["gpufleet_toolchain"]
    assert toolchain["cmake"]["version"] and toolchain["nvcc"]["gpu_codes"], toolchain
    left = out.split("--- left in the cache home:")[1]
    assert ".probes-" not in left, "no half-written cache file is left: %s" % left
    assert os.listdir(str(home)) == []   # the namespace is gone: its tmpfs never showed outside it
