# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/action/fleet_reports.py: where reports go, with which mode, and whose files they may replace (issue 12
items 15 and 19)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from ansible_collections.gpufleet.preflight.plugins.action import fleet_reports as action


@pytest.mark.parametrize("report_dir, cwd, expected", [
    (None, "/home/op/fleet", "/home/op/fleet/reports"),       # not /reports when $PWD is unset
    ("out", "/home/op/fleet", "/home/op/fleet/out"),
    ("/srv/reports/", "/home/op", "/srv/reports"),
])
def test_report_dir_is_resolved_from_the_real_cwd(report_dir, cwd, expected):
    assert action.resolve_report_dir(report_dir, cwd) == expected


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_reports_are_written_with_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = action.write_atomically(str(tmp_path), "preflight.md", "# Fleet preflight\n", 0o666 & ~action.current_umask())
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == mode


def test_a_users_own_file_is_foreign_an_earlier_report_is_not(tmp_path):
    (tmp_path / "preflight.md").write_text("# my notes\n")
    (tmp_path / "preflight.json").write_text('{\n  "finished": "x",\n  "hosts": {}\n}\n')
    os.symlink("/etc/passwd", str(tmp_path / "preflight.xml"))
    names = ["preflight.json", "preflight.xml", "preflight.md"]
    assert action.foreign_files(str(tmp_path), names) == [str(tmp_path / "preflight.xml"), str(tmp_path / "preflight.md")]
    assert action.foreign_files(str(tmp_path / "missing"), names) == []
