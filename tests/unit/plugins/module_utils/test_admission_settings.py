# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission launcher's settings (plugins/module_utils/_build/_admission_settings.py): the one size rule, unknown keys
and bad values refused by name, the budget, what the launcher derives."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils import _human as human
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_settings as rule

GIB = 1024 ** 3


def test_budget_smaller_of_config_and_cgroup_less_reserve():
    assert rule.budget({"budget_bytes": 16 * GIB, "reserve_bytes": GIB // 2}, 12 * GIB, 20 * GIB) == 12 * GIB - GIB // 2
    assert rule.budget({"budget_bytes": None, "reserve_bytes": 0}, None, 20 * GIB) == 20 * GIB


MIB = 1024 ** 2


@pytest.mark.parametrize("overhead, reserve, charged", [
    (215 * MIB, 400 * MIB, 0),                  # setup.py holding torch, inside the 400 MiB kept for it
    (1600 * MIB, 512 * MIB, 1088 * MIB),        # 76 waiting launchers outgrow the default reserve: the rest counts
    (512 * MIB, 512 * MIB, 0),
    (100 * MIB, 0, 100 * MIB),                  # no reserve: all of it counts
    (0, 512 * MIB, 0),
    (100 * MIB, -5, 100 * MIB),                 # a budget floored at 1 byte leaves no reserve to spend
])
def test_only_the_overhead_beyond_the_reserve_is_charged(overhead, reserve, charged):
    assert rule.beyond_reserve(overhead, reserve) == charged


SIZE_TABLE = ["16GiB", "512M", "512MiB", "512Mi", "1.5GiB", "100", 100, 0, "0", 3.0, "64gib", "64Gib", "64G", "2K",
              "1.7B", "1E", " 64GiB ", "7T", "0.3K", "64g", "64b", "64KiB", "1.5b", "64B",
              # refused by both
              "64GB", "64gb", "5 GB", "5 GiB", ".5GiB", "-1", -1, "1e9", "lots", "", None, True, 1.5, float("nan"),
              float("inf"), [1], "64GiBs", "64Bi", "G",
              "64giB", "64GIB", "64Mi", "64gIb", "64kiB", "64Kib", "64KIB", "64KB", "64Kb"]


@pytest.mark.parametrize("value", SIZE_TABLE)
def test_the_launchers_size_parser_gives_the_projects_answers(value):
    """The launcher stays one stdlib file, so it keeps a tiny parser; this table holds it to _human's rule."""
    try:
        expected = human.parse_size_option("reserve_bytes", value)
    except ValueError as exc:
        with pytest.raises(ValueError) as refused:
            rule.parse_size("reserve_bytes", value)
        assert "reserve_bytes" in str(refused.value) and "reserve_bytes" in str(exc)
    else:
        assert rule.parse_size("reserve_bytes", value) == expected


def test_checked_config_refuses_unknown_keys_and_bad_values_naming_them():
    with pytest.raises(ValueError, match="unknown admission setting.*margn, reserv_bytes"):
        rule.checked_config({"margn": 1.2, "reserv_bytes": "1GiB"})
    with pytest.raises(ValueError, match="budget_bytes: '64GB' is ambiguous"):
        rule.checked_config({"budget_bytes": "64GB"})
    with pytest.raises(ValueError, match="margin"):
        rule.checked_config({"margin": "1.2"})
    assert rule.checked_config({"reserve_bytes": "1GiB"})["reserve_bytes"] == GIB
    assert rule.checked_config({})["budget_bytes"] is None


@pytest.mark.parametrize("settings, message", [
    ({"max_threads": 0}, "max_threads"), ({"threads_per_source": "yes"}, "threads_per_source"),
    ({"max_thread": 4}, "unknown admission setting(s) max_thread"),
])
def test_thread_settings_refused(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        rule.checked_config(settings)


def test_launcher_config_derives_the_per_thread_bytes_and_puts_state_beside_the_config():
    config = rule.launcher_config({"default_bytes": "2GiB", "default_times": 3}, "/b/admission")
    assert config["per_thread_bytes"] == 2 * GIB and config["default_bytes"] == 6 * GIB
    assert config["state_dir"] == "/b/admission" and config["peaks_path"] == "/b/admission/peaks.json"
    named = rule.launcher_config({"state_dir": "/s", "peaks_path": "/p.json"}, "/b/admission")
    assert named["state_dir"] == "/s" and named["peaks_path"] == "/p.json"
