# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight's reports on a REAL full disk: a clear error, no traceback, and the last reports kept whole.

The report directory is a 64 KiB tmpfs filled to the last byte, mounted in a private mount namespace
(`unshare -m`) so nothing outside the test sees it and it disappears with the namespace.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="mounting a tmpfs in a private mount namespace needs root and unshare")

SCRIPT = r"""
set -e
mount -t tmpfs -o size=64k gpufleet-full "$1"
printf '{\n  "finished": "previous",\n  "hosts": {}\n}\n' > "$1/preflight.json"
dd if=/dev/zero of="$1/filler" bs=4k 2>/dev/null || true
shift
set +e
"$@"
echo "playbook rc=$?"
echo "--- left in the report dir:"
ls -A "$REPORTS"
echo "--- preflight.json:"
cat "$REPORTS/preflight.json"
"""


def test_full_report_disk_fails_clearly_and_keeps_the_last_reports(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    env = dict(os.environ, REPORTS=str(reports), ANSIBLE_NOCOLOR="1")
    run = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", SCRIPT, "full-disk", str(reports),
         "ansible-playbook", "playbooks/preflight.yml", "-e", "preflight_report_dir=%s" % reports,
         "-e", "preflight_max_build_processes=100000"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    out = run.stdout
    assert run.returncode == 0, out
    assert "playbook rc=2" in out, out
    assert "report_dir: cannot write the reports to %s: No space left on device; the previous reports there are left as they were" % reports in out, out
    assert "Traceback" not in out
    left = out.split("--- left in the report dir:")[1].split("--- preflight.json:")[0].split()
    assert sorted(left) == ["filler", "preflight.json"], "no half-written report or temp file is left: %s" % left
    assert out.rstrip().endswith('{\n  "finished": "previous",\n  "hosts": {}\n}'), "the previous report is intact"
    # The namespace is gone: the tmpfs never showed outside it.
    assert os.listdir(str(reports)) == []
