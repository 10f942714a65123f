# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_node_facts: option validation (every bad value named) and gathering the subsets asked for."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._node_facts import SUBSETS, gather, validate_options

DEFAULTS = {
    "gather_subset": ["all"], "build_process_names": [], "build_process_patterns": [], "gpu_timeout": 10.0,
    "disk_paths": [], "toolchain_python": None, "kernel_events_window": 86400,
}


def params(**changes):
    return dict(DEFAULTS, **changes)


def test_defaults():
    options = validate_options(params())
    assert options["subsets"] == list(SUBSETS)
    assert options["gpu_timeout"] == 10.0 and options["kernel_events_window"] == 86400
    assert len(options["disk_paths"]) == 2


@pytest.mark.parametrize("changes, message", [
    ({"gather_subset": ["memory", "gpu"]}, "gather_subset: unknown subset gpu"),
    ({"gpu_timeout": float("nan")}, "gpu_timeout: nan is not a finite number of seconds"),
    ({"gpu_timeout": float("inf")}, "gpu_timeout: inf is not a finite number of seconds"),
    ({"gpu_timeout": 1e99}, "gpu_timeout: 1e+99 seconds is more than the 600 allowed"),
    ({"gpu_timeout": 0}, "gpu_timeout: must be greater than 0 seconds, got 0"),
    ({"gpu_timeout": -3}, "gpu_timeout: must be greater than 0 seconds, got -3"),
    ({"kernel_events_window": 0}, "kernel_events_window: must be greater than 0 seconds, got 0"),
    ({"kernel_events_window": 10 ** 12}, "kernel_events_window: 1000000000000 seconds is more than the 31622400 allowed"),
    ({"disk_paths": ["build"]}, "disk_paths: 'build' is not an absolute path"),
    ({"disk_paths": ["/srv", "../x"]}, "disk_paths: '../x' is not an absolute path"),
    ({"build_process_patterns": ["ninja("]}, "build_process_patterns: 'ninja(' is not a valid regular expression"),
    ({"build_process_patterns": [""]}, "build_process_patterns: '' is not a regular expression"),
    ({"build_process_names": ["/usr/bin/mold"]}, "build_process_names: '/usr/bin/mold' holds '/'"),
    ({"disk_paths": ["/tmp\x00x"]}, "disk_paths: '/tmp\\x00x' holds a NUL byte"),
    ({"toolchain_python": ""}, "toolchain_python: '' is neither an absolute path nor a program name"),
    ({"toolchain_python": "   "}, "toolchain_python: '   ' is neither an absolute path nor a program name"),
    ({"toolchain_python": "['python']"}, "toolchain_python: \"['python']\" is neither an absolute path"),
])
def test_bad_options_are_named(changes, message):
    with pytest.raises(ValueError) as info:
        validate_options(params(**changes))
    assert str(info.value).startswith(message)


def test_gather_only_what_was_asked():
    facts = gather(validate_options(params(gather_subset=["memory"])), run=None)
    assert sorted(facts) == ["gpufleet_memory"]
    facts = gather(validate_options(params(gather_subset=["memory", "cpus", "disks"], disk_paths=["/"])), run=None)
    assert sorted(facts) == ["gpufleet_cpus", "gpufleet_disks", "gpufleet_memory"]
    assert list(facts["gpufleet_disks"]["paths"]) == ["/"]


def test_a_collector_error_surfaces_naming_the_option():
    """gather raises ValueError under the module's option name (node_facts turns it into fail_json); the real
    catastrophic pattern against a real long argv is tests/host/test_node_facts_host.py."""
    options = validate_options(params(gather_subset=["build_processes", "memory"]))
    options["build_process_patterns"] = ["(?P<x>"]
    with pytest.raises(ValueError) as info:
        gather(options, run=None)
    assert str(info.value).startswith("build_process_patterns: '(?P<x>' is not a valid regular expression")


@pytest.mark.parametrize("subset, state_key", [("gpus", "state"), ("kernel_events", "readable"), ("toolchain", None)])
def test_a_parser_that_raises_costs_its_subset_only(monkeypatch, subset, state_key):
    """A hostile probe's output that a parser does not survive (OverflowError of a 400-digit field, ValueError of a
    table row) ended node_facts and the health check with a traceback (exit 1, 'not ready', no metrics)."""
    from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _gpus, _kernel_events, _toolchain

    def boom(*args, **kwargs):
        raise OverflowError("int too large to convert to float")
    target = {"gpus": (_gpus, "collect_gpus"), "kernel_events": (_kernel_events, "collect_kernel_events"),
              "toolchain": (_toolchain, "collect_toolchain")}[subset]
    monkeypatch.setattr(target[0], target[1], boom)
    facts = gather(validate_options(params(gather_subset=["memory", subset])), run=None)
    assert facts["gpufleet_memory"]["effective"]["total_bytes"] > 0
    lost = facts["gpufleet_" + subset]
    why = lost.get("message") or lost.get("error")
    assert why.startswith("collecting %s failed: OverflowError" % subset), lost
    if state_key == "state":
        assert lost["state"] == "error" and lost["devices"] == []
    elif state_key == "readable":
        assert lost["readable"] is False
