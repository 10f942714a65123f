# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/action/fleet_reports.py: where reports go, with which mode, and whose files they may replace (issue 12
items 15 and 19); a FIFO or device where a report or the report dir should be is said for what it is and never
opened (issue 18 item 12)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat
import threading

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
    assert action.foreign_files(str(tmp_path), names) == [
        (str(tmp_path / "preflight.xml"), "a symbolic link"),
        (str(tmp_path / "preflight.md"), None)]
    assert action.foreign_files(str(tmp_path / "missing"), names) == []


def test_a_fifo_named_like_a_report_is_never_opened(tmp_path):
    """Opened before: the preflight hung for ever on a FIFO named preflight.md (issue 18 item 12)."""
    names = ["preflight.json", "preflight.xml", "preflight.md", "preflight.html"]
    for name in names:
        os.mkfifo(str(tmp_path / name))
    found = []
    worker = threading.Thread(target=lambda: found.extend(action.foreign_files(str(tmp_path), names)))
    worker.daemon = True
    worker.start()
    worker.join(10)
    hung = worker.is_alive()
    if hung:  # release the thread that waits on open(): a writer end lets it go
        for name in names:
            try:
                os.close(os.open(str(tmp_path / name), os.O_RDWR))
            except OSError:
                pass
    assert not hung, "foreign_files hung on a FIFO"
    assert found == [(str(tmp_path / name), "a FIFO (named pipe)") for name in names]


def test_the_report_dir_that_is_no_directory_is_said_for_what_it_is(tmp_path):
    (tmp_path / "plain").write_text("x")
    os.symlink(str(tmp_path / "gone"), str(tmp_path / "dangling"))
    assert action.report_dir_problem("/dev/full") == (
        "report_dir: /dev/full exists and is a character device, not a directory: choose a directory "
        "(it is created when missing)")
    assert "exists and is a regular file, not a directory" in action.report_dir_problem(str(tmp_path / "plain"))
    assert "symbolic link to a missing target" in action.report_dir_problem(str(tmp_path / "dangling"))
    assert action.report_dir_problem(str(tmp_path)) is None
    assert action.report_dir_problem(str(tmp_path / "missing")) is None


@pytest.mark.parametrize("number, advice", [
    (errno.ENOSPC, "free space there"), (errno.EACCES, "make it writable"), (errno.ENOTDIR, "choose another report_dir")])
def test_only_a_full_disk_asks_for_free_space(number, advice):
    text = action.write_error("/r", OSError(number, os.strerror(number)))
    assert text.startswith("report_dir: cannot write the reports to /r: %s;" % os.strerror(number))
    assert advice in text and (number == errno.ENOSPC) == ("free space" in text)


def test_the_collection_version_comes_from_galaxy_yml_or_the_manifest(tmp_path):
    assert action.collection_version() == "0.1.0" or action.collection_version()  # the checkout's galaxy.yml
    (tmp_path / "galaxy.yml").write_text("namespace: x\nversion: '2.3.4'\n")
    assert action.collection_version(str(tmp_path)) == "2.3.4"
    (tmp_path / "MANIFEST.json").write_text('{"collection_info": {"version": "9.9.9"}}')
    assert action.collection_version(str(tmp_path)) == "9.9.9"
    assert action.run_facts({"ansible_limit": "node*", "ansible_inventory_sources": ["/inv/fleet.ini"]})["limit"] == "node*"
