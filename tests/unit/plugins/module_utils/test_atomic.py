# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_atomic.write_file: the one atomic write; its one error policy (clean up, raise as it came)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils import _atomic
from ansible_collections.gpufleet.preflight.plugins.module_utils._atomic import write_file


def test_writes_text_and_bytes_with_the_mode(tmp_path):
    target = str(tmp_path / "out.json")
    assert write_file(target, u"caf\u00e9\n", mode=0o644) == target
    assert (tmp_path / "out.json").read_bytes() == u"caf\u00e9\n".encode("utf-8")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
    write_file(target, b"\x00\x01")
    assert (tmp_path / "out.json").read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert os.listdir(str(tmp_path)) == ["out.json"]


def test_a_lone_surrogate_is_refused_or_replaced(tmp_path):
    target = str(tmp_path / "m.prom")
    with pytest.raises(UnicodeEncodeError):
        write_file(target, u"\udc80")
    assert os.listdir(str(tmp_path)) == []
    write_file(target, u"a\udc80", errors="replace")
    assert (tmp_path / "m.prom").read_bytes() == b"a?"


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text(u"keep")
    os.symlink(str(victim), str(tmp_path / "out"))
    write_file(str(tmp_path / "out"), u"new")
    assert victim.read_text() == u"keep" and not os.path.islink(str(tmp_path / "out"))


def test_a_failed_rename_leaves_no_temp_file_and_raises_as_it_came(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "inside").write_text(u"x")
    with pytest.raises(OSError):
        write_file(str(tmp_path / "dir"), u"over a directory")
    assert sorted(os.listdir(str(tmp_path))) == ["dir"]


def test_a_missing_directory_raises_oserror(tmp_path):
    with pytest.raises(OSError) as err:
        write_file(str(tmp_path / "nowhere" / "f"), u"x")
    assert err.value.errno == errno.ENOENT


def test_the_prefix_names_the_temp_file(tmp_path, monkeypatch):
    seen = []
    real = os.rename

    def rename(src, dst):
        seen.append(os.path.basename(src))
        return real(src, dst)

    monkeypatch.setattr(_atomic.os, "rename", rename)
    write_file(str(tmp_path / "c.json"), u"{}", prefix=".probes-")
    assert seen[0].startswith(".probes-") and seen[0].endswith(".tmp")


def test_taken_names_give_up_after_100(tmp_path, monkeypatch):
    monkeypatch.setattr(_atomic.os, "urandom", lambda n: b"\x00" * n)
    (tmp_path / ".f.000000000000.tmp").write_text(u"")
    with pytest.raises(OSError) as err:
        write_file(str(tmp_path / "f"), u"x")
    assert err.value.errno == errno.EEXIST
