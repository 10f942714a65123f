# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_build_watchdog: headroom arithmetic (pure) and what it watches in fixture trees; the real watchdog run is in
tests/build/test_guarded_build_watchdog.py."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_watchdog import (
    WatchdogConfinement,
    headroom,
    parse_limit,
    parse_stat_value,
)
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._confinement import Unavailable


@pytest.mark.parametrize("text, limit", [
    ("max\n", None), ("9223372036854771712\n", None), ("536870912\n", 512 << 20), ("", None),
])
def test_parse_limit(text, limit):
    assert parse_limit(text) == limit


def test_headroom_does_not_count_reclaimable_page_cache():
    assert headroom(512 << 20, 400 << 20, 100 << 20) == 212 << 20
    assert headroom(512 << 20, 400 << 20, None) == 112 << 20
    assert headroom(512 << 20, 10 << 20, 50 << 20) == 512 << 20  # cache larger than usage: never negative use
    assert parse_stat_value("cache 5\ntotal_inactive_file 7\n", "total_inactive_file") == 7
    assert parse_stat_value("inactive_file 7\n", "active_file") is None


def _tree(tmp_path, cgroup_line, mountinfo, files):
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "cgroup").write_text(cgroup_line)
    (tmp_path / "proc" / "self" / "mountinfo").write_text(mountinfo)
    (tmp_path / "proc" / "meminfo").write_text(u"MemTotal: 24000000 kB\nMemAvailable: 2000000 kB\n")
    for path, text in files.items():
        full = tmp_path / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(text)


def test_watches_the_tightest_v2_limit_over_the_ancestors(tmp_path):
    _tree(tmp_path, u"0::/ctr/inner\n",
          u"30 20 0:26 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 ro\n",
          {"sys/fs/cgroup/cgroup.controllers": u"memory pids\n",
           "sys/fs/cgroup/ctr/memory.max": u"536870912\n",
           "sys/fs/cgroup/ctr/inner/memory.max": u"max\n",
           "sys/fs/cgroup/ctr/memory.current": u"419430400\n",
           "sys/fs/cgroup/ctr/memory.stat": u"anon 1\ninactive_file 104857600\n"})
    watchdog = WatchdogConfinement("u", 1 << 30, 64 << 20, root=str(tmp_path))
    watchdog.prepare()
    assert watchdog.watched["source"].endswith("sys/fs/cgroup/ctr") and watchdog.watched["limit"] == 512 << 20
    assert watchdog.headroom() == 212 << 20
    assert watchdog.describe()["floor_human"] == "64Mi"


def test_falls_back_to_memavailable_and_refuses_a_floor_above_it(tmp_path):
    _tree(tmp_path, u"", u"", {})
    watchdog = WatchdogConfinement("u", 1 << 30, 64 << 20, root=str(tmp_path))
    watchdog.prepare()
    assert watchdog.watched["source"].endswith("proc/meminfo") and watchdog.headroom() == 2000000 * 1024
    with pytest.raises(Unavailable) as err:
        WatchdogConfinement("u", 1 << 30, 8 << 30, root=str(tmp_path)).prepare()
    assert "not above the watchdog's floor of 8.0Gi" in str(err.value)
