# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/_readiness/_policy_validation.py: every option checked by its rule, custom checks compiled, subsets
found from the parsed query; each error names the option."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy_validation
from ansible_collections.gpufleet.preflight.tests.unit.plugins.module_utils.conftest import GIB, memory, policy


@pytest.mark.parametrize("value, expected", [
    ("64GiB", ("absolute", 64 * GIB)),
    ("512MiB", ("absolute", 512 * 1024 ** 2)),
    ("0.8", ("fraction", 0.8)),
    (0.5, ("fraction", 0.5)),
    ("1", ("fraction", 1.0)),
    ("8589934592", ("absolute", 8 * GIB)),
])
def test_memory_requirement_forms(value, expected):
    assert _policy_validation.parse_memory_requirement(value) == expected


@pytest.mark.parametrize("overrides, option", [
    (dict(min_available_memory="lots"), "min_available_memory"),
    (dict(min_available_memory="1.5"), "min_available_memory"),
    (dict(min_available_memory="-3"), "min_available_memory"),
    (dict(max_build_processes=-1), "max_build_processes"),
    (dict(max_memory_pressure=150.0), "max_memory_pressure"),
    (dict(max_memory_pressure=-1.0), "max_memory_pressure"),
    (dict(build_process_patterns=["ninja("]), "build_process_patterns"),
    (dict(wait=-5), "wait"),
    (dict(custom_checks=[{"name": "x", "query": "gpus.devices[", "equals": 0}]), "custom_checks[0]"),
    (dict(custom_checks=[{"name": "x", "query": "gpus.count"}]), "custom_checks[0]"),
    (dict(custom_checks=[{"name": "x", "query": "gpus.count", "max": "ten"}]), "custom_checks[0]"),
    (dict(custom_checks=[{"name": "x", "query": "gpus.count", "equals": 1, "typo": 1}]), "custom_checks[0]"),
    (dict(custom_checks=["gpus.count == 8"]), "custom_checks[0]"),
    (dict(gpu_timeout=0), "gpu_timeout"),
    (dict(gpu_timeout=-2.5), "gpu_timeout"),
    (dict(compute_capability="sm_120"), "compute_capability"),
    (dict(compute_capability="twelve"), "compute_capability"),
    (dict(expected_gpus=-1), "expected_gpus"),
    (dict(min_free_disk="plenty"), "min_free_disk"),
])
def test_bad_policy_names_the_option(overrides, option):
    with pytest.raises(ValueError) as err:
        policy(**overrides)
    assert str(err.value).startswith(option)


@pytest.mark.parametrize("query, subsets", [
    ("length(build_processes.processes)", ["build_processes"]),   # a function over a path
    ("`3`", []),                                                  # a literal reads no fact
    ("'text'", []),
    ('"gpus".count', ["gpus"]),                                   # a quoted name
    ("toolchain | nvcc.present", ["toolchain"]),                  # a pipe: the right side reads the left's result
    ("gpus.devices[?temperature > `85`] | length(@)", ["gpus"]),
    ("sort_by(disks.paths.*, &free_bytes)[0]", ["disks"]),
    ("[memory.effective, cpus.count]", ["cpus", "memory"]),
    ("{a: kernel_events.xids}", ["kernel_events"]),
    ("gpus.count || toolchain.nvcc", ["gpus", "toolchain"]),
    ("@", ["all"]),                                               # the whole facts: unclear, gather all
    ("length(@)", ["all"]),
    ("*", ["all"]),
])
def test_custom_check_subsets_come_from_the_parsed_query(query, subsets):
    checked = _policy_validation.compile_custom_check(0, {"name": "c", "query": query, "equals": 1})
    assert checked["subsets"] == subsets


def test_valid_jmespath_is_gathered_for_not_rejected():
    # Before: "gather_subset: unknown subset length(build_processes" from the node.
    wanted = _policy.subsets_for(policy(profiles=[], custom_checks=[
        {"name": "n", "query": "length(build_processes.processes)", "max": 0}]))
    assert wanted == ["memory", "build_processes"]
    assert _policy.subsets_for(policy(profiles=[], custom_checks=[{"name": "all", "query": "@", "equals": 1}])) == ["all"]


def test_a_query_over_no_known_fact_names_the_check():
    with pytest.raises(ValueError, match=r"custom_checks\[0\] \(n\): the query 'gpu.count' reads gpu, which node_facts "
                                         r"does not gather"):
        policy(custom_checks=[{"name": "n", "query": "gpu.count", "equals": 8}])


@pytest.mark.parametrize("query", [5, 1.5, ["memory"], {"a": 1}, True])
def test_a_query_that_is_not_a_string_names_the_check(query):
    # Before: TypeError / "unhashable type: 'list'" from jmespath's cache, a traceback from the readiness action.
    with pytest.raises(ValueError, match=r"custom_checks\[0\] \(c\): query must be a JMESPath expression as a string"):
        policy(custom_checks=[{"name": "c", "query": query, "equals": 1}])


@pytest.mark.parametrize("name", [5, ["a"], "  "])
def test_a_name_that_is_not_a_string_is_refused(name):
    with pytest.raises(ValueError, match=r"custom_checks\[0\]: name must be a non-empty string"):
        policy(custom_checks=[{"name": name, "query": "memory", "equals": 1}])


def test_without_jmespath_custom_checks_are_not_applied_on_the_node(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "jmespath", None)  # what `import jmespath` meets where it is not installed
    spec = {"name": "c", "query": "memory.effective", "equals": 1}
    with pytest.raises(ValueError, match=r"custom_checks\[0\] \(c\): custom checks need the jmespath Python library"):
        policy(custom_checks=[spec])
    args = dict(min_available_memory="4GiB", max_build_processes=0, max_memory_pressure=None,
                build_process_patterns=[], profiles=[], custom_checks=[spec], wait=0, interval=5)
    node_policy = _policy_validation.validate_policy(args, require_jmespath=False)
    checks = _policy.evaluate({"memory": memory(8 * GIB, 16 * GIB), "build_processes": {"count": 0}}, node_policy)
    custom = [c for c in checks if c["profile"] == "custom"]
    assert [c["status"] for c in custom] == ["skipped"]
    assert "jmespath Python library is not installed" in custom[0]["message"]
    assert _policy.verdict(checks)[0] is True


@pytest.mark.parametrize("option", ["gpu_timeout", "wait", "interval", "max_memory_pressure"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_refused_by_name(option, value):
    with pytest.raises(ValueError, match="^%s: must be a finite number" % option):
        policy(**{option: value, "gpu_timeout": value if option == "gpu_timeout" else 10.0})


@pytest.mark.parametrize("option", ["min_available_memory", "min_free_disk"])
@pytest.mark.parametrize("value", ["64GB", "64 gb", "500MB", "2TB", "1kB"])
def test_decimal_units_are_refused_not_read_as_binary(option, value):
    with pytest.raises(ValueError, match=r"^%s: '%s' is ambiguous .* write \d+[KMGT]iB" % (option, value)):
        policy(**{option: value})


@pytest.mark.parametrize("value, expected", [("64GiB", 64 * GIB), ("64G", 64 * GIB), (4096, 4096)])
def test_binary_sizes_keep_their_meaning(value, expected):
    assert policy(min_available_memory=value)["min_available_memory"] == ("absolute", expected)


@pytest.mark.parametrize("path", ["build", "./build", "~build"])
def test_a_relative_build_path_is_refused(path):
    with pytest.raises(ValueError, match="^build_path: '.*' is not an absolute path on the node"):
        policy(build_path=path)


# ---------------------------------------------------------------- the bad-input sweep's readiness findings


@pytest.mark.parametrize("overrides, words", [
    ({"min_available_memory": "5 GiB"}, "min_available_memory: '5 GiB' is not a size like 64GiB"),
    ({"min_available_memory": "1e99GiB"}, "min_available_memory: '1e99GiB' is not a size"),
    ({"min_free_disk": "5 GiB"}, "min_free_disk: '5 GiB' is not a size"),
    ({"compute_capability": ""}, "compute_capability: '' is not a compute capability"),
    ({"compute_capability": "12.0\n"}, "compute_capability: '12.0\\n' is not a compute capability"),
    ({"min_driver_version": "570..1"}, "min_driver_version: '570..1' is not a driver version"),
    ({"min_driver_version": ""}, "min_driver_version: '' is not a driver version"),
    ({"nvcc_arch": "sm_12x"}, "nvcc_arch: 'sm_12x' is not a GPU architecture like sm_120a"),
    ({"nvcc_arch": "120"}, "nvcc_arch: '120' is not a GPU architecture"),
    ({"cmake_min_version": "3..18"}, "cmake_min_version: '3..18' is not a version"),
    ({"cmake_policy_version_minimum": "three"}, "cmake_policy_version_minimum: 'three' is not a version"),
    ({"build_path": "/tmp\x00x"}, "build_path: '/tmp\\x00x' is not a path"),
    ({"toolchain_python": "   "}, "toolchain_python: '   ' is not a path"),
    ({"build_process_names": ["ninja\x00"]}, "build_process_names: 'ninja\\x00' is not an executable name"),
    ({"fatal_xids": [79, -1]}, "fatal_xids: -1 is not an NVIDIA Xid code"),
    ({"fatal_xids": [0]}, "fatal_xids: 0 is not an NVIDIA Xid code"),
    ({"allowed_gpu_compute_apps": [""]}, "allowed_gpu_compute_apps: '' is not a process name"),
    ({"allowed_gpu_compute_apps": ["dcgm\x00"]}, "allowed_gpu_compute_apps: 'dcgm\\x00' is not a process name"),
    ({"wait": 1e99}, "wait: must be 0 to 86400 seconds"),
    ({"custom_checks": [{"name": "c", "query": "memory", "min": float("nan")}]}, "custom_checks[0] (c): min must be a finite"),
])
def test_typos_are_refused_by_name(overrides, words):
    with pytest.raises(ValueError) as raised:
        policy(**overrides)
    assert words in str(raised.value)


@pytest.mark.parametrize("overrides", [{"nvcc_arch": "compute_120"}, {"cmake_policy_version_minimum": ""},
                                       {"min_driver_version": None}, {"min_free_disk": "20g"}, {"compute_capability": None},
                                       {"fatal_xids": [48, 79]}, {"allowed_gpu_compute_apps": ["dcgm-exporter", "/usr/bin/x"]}])
def test_documented_forms_still_pass(overrides):
    policy(**overrides)
