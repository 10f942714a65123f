# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_reap on fixture trees: what is never signalled, and bad graces. Signalling real processes: tests/host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._reap import OTHER_NAMESPACE, pid_namespace, reap

STAT = "%d (%s) S %d %d %d 0 -1 4194304 100 0 0 0 12 3 0 0 20 0 1 0 %d 3133440 382 18446744073709551615 0 0\n"


def proc_tree(tmp_path, procs, own_ns="pid:[4026531836]"):
    """A /proc with ``self`` (pid 50, parent 1) and ``procs``: ``{pid: (comm, start_ticks, state, pid namespace)}``."""
    root = tmp_path / "root"
    entries = dict(procs)
    entries.setdefault(50, ("python3", 10, "S", own_ns))
    entries.setdefault(1, ("init", 1, "S", own_ns))
    for pid, (comm, start, state, namespace) in entries.items():
        directory = root / "proc" / str(pid)
        (directory / "ns").mkdir(parents=True)
        (directory / "stat").write_text((STAT % (pid, comm, 1 if pid != 1 else 0, pid, pid, start)).replace(" S ", " %s " % state, 1))
        os.symlink(namespace, str(directory / "ns" / "pid"))
    os.symlink("50", str(root / "proc" / "self"))
    return str(root)


def selected(pid, comm, start, **extra):
    return dict({"pid": pid, "ppid": 1, "name": comm, "user": "root", "cmdline": comm, "start_ticks": start,
                 "state": "S", "zombie": False}, **extra)


def test_pid_namespace(tmp_path):
    root = proc_tree(tmp_path, {7: ("ninja", 5, "S", "pid:[4026532001]")})
    assert pid_namespace("self", root) == "pid:[4026531836]"
    assert pid_namespace(7, root) == "pid:[4026532001]"
    assert pid_namespace(99, root) is None


@pytest.mark.parametrize("procs, selection, reasons", [
    # a container's ninja seen from its host: never signalled unasked
    ({7: ("ninja", 5, "S", "pid:[4026532001]")}, [selected(7, "ninja", 5)], [OTHER_NAMESPACE]),
    # pid 1 and the module itself
    ({}, [selected(1, "init", 1), selected(50, "python3", 10)],
     ["protected: pid 1, this process or one of its ancestors"] * 2),
    # a zombie: only its parent can reap it
    ({8: ("cc1plus", 6, "Z", "pid:[4026531836]")}, [selected(8, "cc1plus", 6, state="Z", zombie=True, ppid=300)],
     ["zombie: already dead, only its parent (pid 300) can reap it"]),
    # the pid was reused since the scan (another start time): gone, nothing to report
    ({9: ("ninja", 99, "S", "pid:[4026531836]")}, [selected(9, "ninja", 5)], []),
])
def test_what_is_never_signalled(tmp_path, procs, selection, reasons):
    root = proc_tree(tmp_path, procs)
    result = reap(selection, grace=0, check_mode=True, root=root, self_pid=50)
    assert [item["reason"] for item in result["remaining"]] == reasons
    assert result["would_kill"] == [] and result["killed"] == []


def test_other_namespace_reached_only_when_asked(tmp_path):
    root = proc_tree(tmp_path, {7: ("ninja", 5, "S", "pid:[4026532001]")})
    result = reap([selected(7, "ninja", 5)], grace=0, check_mode=True, root=root, self_pid=50, all_namespaces=True)
    assert [item["pid"] for item in result["would_kill"]] == [7] and result["changed"] is True


@pytest.mark.parametrize("grace, words", [
    (float("nan"), "grace: nan is not a finite number of seconds"),
    (float("inf"), "grace: inf is not a finite number of seconds"),
    (1e99, "grace: 1e+99 seconds is more than the 3600 allowed"),
    (-1, "grace: must be 0 or more seconds, got -1"),
    (None, "grace: None is not a number of seconds"),
])
def test_bad_grace_is_refused_before_any_signal(grace, words):
    with pytest.raises(ValueError) as info:
        reap([], grace=grace)
    assert str(info.value) == words
