# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

"""The fleet library's pure parts: cgroup layout detection (v1 and v2), sshd config, ad-hoc output."""

import pytest

from fleetlib import FleetError, MemoryCgroups, fleet_size_from_env, parse_adhoc_status, sshd_config_text

V1_SELF = "5:devices:/\n4:memory:/process_api/abc\n0::/\n"
V2_SELF = "0::/user.slice/session-1.scope\n"


@pytest.mark.parametrize("self_cgroup, controllers, version, base", [
    (V1_SELF, None, 1, "{root}/memory/process_api/abc"),
    ("4:memory:/\n", None, 1, "{root}/memory"),
    (V2_SELF, "cpu io memory pids\n", 2, "{root}/user.slice/session-1.scope"),
    ("0::/\n", "memory\n", 2, "{root}"),
])
def test_memory_cgroup_layout_is_detected(tmp_path, self_cgroup, controllers, version, base):
    proc = tmp_path / "cgroup"
    proc.write_text(self_cgroup)
    root = tmp_path / "sys"
    root.mkdir()
    if controllers is not None:
        (root / "cgroup.controllers").write_text(controllers)
    cgroups = MemoryCgroups.detect(str(proc), str(root))
    assert (cgroups.version, cgroups.base_dir) == (version, base.format(root=root))
    assert cgroups.limit_file == ("memory.limit_in_bytes" if version == 1 else "memory.max")


@pytest.mark.parametrize("self_cgroup, controllers", [
    (V2_SELF, "cpu io pids\n"),                       # cgroup2 without the memory controller (this host's unified/)
    (V2_SELF, None),
    ("5:devices:/\n", None),
])
def test_no_memory_controller_is_a_clear_error(tmp_path, self_cgroup, controllers):
    proc = tmp_path / "cgroup"
    proc.write_text(self_cgroup)
    if controllers is not None:
        (tmp_path / "cgroup.controllers").write_text(controllers)
    with pytest.raises(FleetError, match="no memory cgroup controller"):
        MemoryCgroups.detect(str(proc), str(tmp_path))


@pytest.mark.parametrize("version, penalties", [((9, 2), False), ((9, 8), True), ((10, 0), True)])
def test_sshd_config(version, penalties):
    text = sshd_config_text("127.0.0.11", 22, "/f/hostkey", "/f/authorized_keys", version)
    for line in ("ListenAddress 127.0.0.11:22", "HostKey /f/hostkey", "PidFile none", "AuthorizedKeysFile /f/authorized_keys",
                 "PermitRootLogin prohibit-password", "PasswordAuthentication no", "UsePAM no", "StrictModes no"):
        assert line in text.splitlines()
    assert ("PerSourcePenalties no" in text) == penalties


def test_adhoc_status_is_parsed_per_host():
    stdout = ('node1 | SUCCESS => {\n    "ping": "pong"\n}\n'
              'node2 | UNREACHABLE! => {\n    "changed": false,\n    "unreachable": true\n}\n'
              'node3 | FAILED! => {\n    "msg": "x"\n}\n'
              'node4 | CHANGED => {}\n')
    assert parse_adhoc_status(stdout) == {"node1": "SUCCESS", "node2": "UNREACHABLE", "node3": "FAILED", "node4": "CHANGED"}


@pytest.mark.parametrize("raw, expected", [("", 8), ("3", 3), ("200", 200)])
def test_fleet_size_from_env(monkeypatch, raw, expected):
    monkeypatch.setenv("GPUFLEET_FLEET_SIZE", raw)
    assert fleet_size_from_env() == expected


@pytest.mark.parametrize("raw", ["0", "201", "eight"])
def test_bad_fleet_size_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv("GPUFLEET_FLEET_SIZE", raw)
    with pytest.raises(FleetError, match="GPUFLEET_FLEET_SIZE"):
        fleet_size_from_env()
