# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_build_options: every bad option value is an error naming the option (tables)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._build_options import (
    LIMITS,
    check_command,
    check_number,
    check_options,
    check_size,
    check_stop_options,
)
from ansible_collections.gpufleet.preflight.plugins.modules.guarded_build import ARGUMENT_SPEC


def params(**options):
    values = dict((key, spec.get("default")) for key, spec in ARGUMENT_SPEC.items())
    values.update(argv=["/bin/true"], chdir="/")
    values.update(options)
    return values


@pytest.mark.parametrize("name, value, low, high, error", [
    ("jobs", 1e99, 1, 4096, "jobs must be between 1 and 4096, got 1e+99"),
    ("jobs", 0, 1, 4096, "jobs must be between 1 and 4096, got 0"),
    ("cpus", 0, 1, 65536, "cpus must be between 1 and 65536, got 0"),
    ("tail_lines", float("nan"), 0, 100000, "tail_lines must be a finite number"),
])
def test_check_number_rejects(name, value, low, high, error):
    with pytest.raises(ValueError) as err:
        check_number(name, value, low, high)
    assert error in str(err.value)


def test_check_number_accepts_and_omits():
    assert check_number("jobs", 8, 1, 4096) == 8 and check_number("jobs", None, 1, 4096) is None


def test_check_size():
    assert check_size("memory_limit", "400MiB") == 400 << 20
    assert check_size("memory_limit", "64G") == 64 << 30 and check_size("memory_limit", 1024) == 1024
    assert check_size("memory_limit", None) is None
    assert check_size("reserve", "0", positive=False) == 0
    for text, error in (("0", "memory_per_thread must be more than 0"),
                        ("lots", "'lots' is not a size like 64GiB"),
                        ("64GB", "'64GB' is ambiguous (decimal GB = 10^9 bytes, or GiB = 2^30?): write 64GiB"),
                        ("5 GiB", "'5 GiB' is not a size"), ("", "'' is not a size"), ("-1", "'-1' is not a size"), ("nan", "'nan' is not a size")):
        with pytest.raises(ValueError) as err:
            check_size("memory_per_thread", text)
        assert error in str(err.value)


@pytest.mark.parametrize("argv, cmd, error", [
    (None, "   ", "cmd is empty"),
    ([], None, "argv must be a non-empty list"),
    ([" "], None, "argv must be a non-empty list"),
])
def test_check_command_rejects(argv, cmd, error):
    with pytest.raises(ValueError) as err:
        check_command(argv, cmd)
    assert error in str(err.value)


def test_check_command_wraps_a_shell_string():
    assert check_command(None, "make -j2") == ["/bin/sh", "-c", "make -j2"]
    assert check_command(["ninja"], None) == ["ninja"]
    assert LIMITS["jobs"] == (1, 4096)


@pytest.mark.parametrize("options, error", [
    (dict(chdir=""), "chdir: must be a path, got an empty string"),
    (dict(chdir="relative/dir"), "chdir: 'relative/dir' is not an absolute path"),
    (dict(chdir="/nonexistent/tree"), "chdir /nonexistent/tree does not exist"),
    (dict(source="rel"), "source: 'rel' is not an absolute path"),
    (dict(log_path=""), "log_path: must be a path"),
    (dict(log_path="relative.log"), "log_path: 'relative.log' is not an absolute path"),
    (dict(log_path="/"), "log_path: / is a directory"),
    (dict(log_path="/nonexistent/dir/build.log"), "log_path: the directory of /nonexistent/dir/build.log does not exist"),
    (dict(status_path="/tmp"), "status_path: /tmp is a directory"),
    (dict(ccache_dir="relative/cache"), "ccache_dir: 'relative/cache' is not an absolute path"),
    (dict(build_dir="   "), "build_dir: must not be empty"),
    (dict(name=""), "name: must not be empty"),
    (dict(source_ignore=[" "]), "source_ignore: an empty entry"),
    (dict(artifacts=[""]), "artifacts: an empty entry"),
    (dict(threads_variable="A B"), "threads_variable: 'A B' is not a CMake variable name"),
    (dict(cmake_args="-DX=1\0"), "cmake_args: contains a NUL byte"),
    (dict(environment={"A": "x\0y"}), "environment: contains a NUL byte"),
    (dict(environment={"A=B": "x"}), "environment: 'A=B' is not a variable name"),
    (dict(environment={"": "x"}), "environment: '' is not a variable name"),
    (dict(environment={"A": [1]}), "environment: A must be a string, a number or null, got a list"),
    (dict(cmake_policy_version_minimum="3.5; rm -rf /"), "cmake_policy_version_minimum: '3.5; rm -rf /' is not a CMake"),
    (dict(cuda_arch_list="sm_120;$(id)"), "cuda_arch_list: 'sm_120;$(id)' is not an arch list"),
    (dict(status_interval=float("nan")), "status_interval: nan is not a finite number of seconds"),
    (dict(timeout=-1), "timeout: must be 1 or more seconds"),
    (dict(jobs=10 ** 20), "jobs must be between 1 and 4096"),
    (dict(jobs=True), "jobs must be a whole number, got True"),
    (dict(memory_per_thread="64GB"), "memory_per_thread: '64GB' is ambiguous"),
])
def test_check_options_rejects(options, error):
    with pytest.raises(ValueError) as err:
        check_options(params(**options))
    assert error in str(err.value)


def test_check_options_accepts_what_the_docs_allow():
    checked = check_options(params(memory_limit="400MiB", memory_per_thread="150MiB", cuda_arch_list="9.0;12.0a",
                                   cmake_policy_version_minimum="3.5", threads_variable="", environment={"A": None},
                                   log_path=os.path.join("/tmp", "build.log")))
    assert checked["limit"] == 400 << 20 and checked["per_thread"] == 150 << 20 and checked["reserve"] is None


@pytest.mark.parametrize("run_id", ["", "a b", "../x", "-x", "r" * 129])
def test_a_bad_run_id_is_named(run_id):
    with pytest.raises(ValueError) as err:
        check_stop_options(params(chdir="/", run_id=run_id))
    assert str(err.value).startswith("run_id: ")


def test_stop_options_read_only_where_the_build_is():
    check_stop_options(params(chdir="/nonexistent/still/a/path", run_id="r-1:2@h"))
    with pytest.raises(ValueError) as err:
        check_stop_options(params(chdir="/", stop_timeout=0))
    assert "stop_timeout" in str(err.value)
