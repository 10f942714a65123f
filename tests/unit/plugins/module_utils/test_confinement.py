# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_confinement: the systemd scope command, the cgroup v2 parent rule, names (pure), and a fixture cgroup dir."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_process import process_start_time
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._confinement import (
    CgroupDir,
    SystemdConfinement,
    Unavailable,
    cgroup_name,
    owned_name,
    parse_owner,
    parse_systemd_version,
    remove_stale_cgroups,
    systemd_run_argv,
    v2_parent_problem,
)


def test_cgroup_name_is_per_build_dir_and_safe():
    first = cgroup_name("sgl kernel/x", "/srv/a/build")
    assert first.startswith("gpufleet-build-sgl_kernel_x-") and "/" not in first
    assert first != cgroup_name("sgl kernel/x", "/srv/b/build")


@pytest.mark.parametrize("text, version", [
    ("systemd 252 (252.22-1~deb12u1)\n+PAM +AUDIT", 252), ("systemd 257 (257.7-1)\n", 257), ("", None), ("x", None),
])
def test_parse_systemd_version(text, version):
    assert parse_systemd_version(text) == version


@pytest.mark.parametrize("version, continue_policy", [(252, False), (253, True), (257, True), (None, False)])
def test_systemd_run_argv(version, continue_policy):
    argv = systemd_run_argv("/usr/bin/systemd-run", "gpufleet-build-x-1", 400 << 20, version)
    assert argv[:6] == ["/usr/bin/systemd-run", "--scope", "--quiet", "--collect", "--unit", "gpufleet-build-x-1.scope"]
    assert "MemoryMax=419430400" in argv and "MemorySwapMax=0" in argv and argv[-1] == "--"
    assert ("OOMPolicy=continue" in argv) is continue_policy


@pytest.mark.parametrize("subtree, procs, mount_root, problem", [
    (True, ["1"], False, None),              # memory already given to children (delegated, leaf-free)
    (False, [], False, None),                # no processes of its own: may enable +memory
    (False, ["812"], True, None),            # the root (or a namespace root): the write decides
    (False, ["812"], False, "holds processes of its own"),   # an ssh session scope: never move its processes
])
def test_v2_parent_problem(subtree, procs, mount_root, problem):
    found = v2_parent_problem(subtree, procs, mount_root)
    assert found is None if problem is None else problem in found


def test_cgroup_dir_counters_from_a_fixture_tree(tmp_path):
    (tmp_path / "memory.current").write_text(u"104857600\n")
    (tmp_path / "memory.peak").write_text(u"419430400\n")
    (tmp_path / "memory.events").write_text(u"low 0\nhigh 0\nmax 40\noom 2\noom_kill 2\n")
    (tmp_path / "cgroup.procs").write_text(u"")
    cgroup = CgroupDir(str(tmp_path), 2, str(tmp_path.parent))
    assert (cgroup.usage(), cgroup.peak(), cgroup.oom_kills(), cgroup.pids()) == (100 << 20, 400 << 20, 2, [])
    assert cgroup.path == "/" + tmp_path.name
    assert cgroup.describe()["version"] == 2


def test_systemd_is_unavailable_without_systemd_as_pid1(tmp_path):
    strategy = SystemdConfinement("u", 1 << 30, 0, root=str(tmp_path), find=lambda name: None, run=None)
    with pytest.raises(Unavailable) as err:
        strategy.prepare()
    assert "PID 1 is not systemd" in str(err.value)


def test_a_collected_scope_stays_described_after_cleanup(tmp_path):
    """The scope is gone with its last process; the attempt's kernel lines and the result still need its path."""
    strategy = SystemdConfinement("gpufleet-build-x-0a1b", 1 << 30, 0, root=str(tmp_path), find=None, run=None)
    assert strategy.describe()["cgroup"] is None and strategy.describe()["unit"] == "gpufleet-build-x-0a1b.scope"
    strategy.scope = "gpufleet-build-x-0a1b-812-2"
    scope_dir = tmp_path / "system.slice" / (strategy.scope + ".scope")
    scope_dir.mkdir(parents=True)
    strategy.cgroup = CgroupDir(str(scope_dir), 2, str(tmp_path))
    assert strategy.cleanup() is None and strategy.cgroup is None
    described = strategy.describe()
    assert described["cgroup"]["path"] == "/system.slice/gpufleet-build-x-0a1b-812-2.scope"
    assert described["unit"] == "gpufleet-build-x-0a1b-812-2.scope"


def test_a_cgroup_name_carries_its_owner_and_is_parsed_back():
    """Finding 8: names from the build dir alone let one run remove another's cgroup; the owner makes it per run."""
    base = cgroup_name("x", "/srv/a/build")
    name = owned_name(base, 1234, 98765)
    assert name == base + "-p1234-s98765" and parse_owner(name) == (base, 1234, 98765)
    assert parse_owner(base) is None and parse_owner("gpufleet-build-x-p12-sx") is None


def test_stale_cgroups_are_removed_only_when_their_owner_is_gone(tmp_path):
    """A fixture parent: a live owner's cgroup (this test's own pid and start time) is never touched; a dead owner's
    empty one is removed; one without an owner in its name is left."""
    me = (os.getpid(), process_start_time(os.getpid()))
    live = tmp_path / owned_name("gpufleet-build-a-1", me[0], me[1])
    dead = tmp_path / owned_name("gpufleet-build-b-2", 999999999, 1)
    unowned = tmp_path / "gpufleet-build-c-3"
    for path in (live, dead, unowned):
        path.mkdir()
    notes = remove_stale_cgroups(str(tmp_path), 1, str(tmp_path), "gpufleet-build-mine-0")
    assert live.is_dir() and unowned.is_dir() and not dead.exists()
    assert notes == ["removed the stale cgroup %s" % dead]
