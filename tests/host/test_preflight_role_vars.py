# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role variables reach the readiness action: playbooks/preflight.yml on this host, its JSON report read back."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def preflight(tmp_path, *extra):
    argv = ["ansible-playbook", "playbooks/preflight.yml", "-e", "preflight_report_dir=%s" % tmp_path,
            "-e", "preflight_max_build_processes=100000", "-e", "preflight_min_available_memory=1MiB"]
    for assignment in extra:
        argv += ["-e", assignment]
    return subprocess.run(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1"), check=False)


def test_kernel_events_window_reaches_the_node(tmp_path):
    run = preflight(tmp_path, "preflight_kernel_events_window=120", '{"preflight_profiles": ["build"]}')
    with open(str(tmp_path / "preflight.json")) as handle:
        report = json.load(handle)
    assert report["policy"]["kernel_events_window"] == 120, run.stdout
    assert "Traceback" not in run.stdout


def test_a_negative_kernel_events_window_is_refused_by_name(tmp_path):
    run = preflight(tmp_path, "preflight_kernel_events_window=-5")
    assert run.returncode != 0
    assert "kernel_events_window: must be 1 to 31622400 seconds, got -5" in run.stdout and "Traceback" not in run.stdout, run.stdout


def test_a_bad_role_variable_is_refused_under_its_own_name_in_one_line(tmp_path):
    """playbooks/preflight.yml skips the check entry point's validation task: readiness names the role variable
    itself, as that task did, without its 16.5 KB dump of the whole argument spec."""
    run = preflight(tmp_path, "preflight_max_build_processes=abc")
    assert run.returncode != 0
    fatal = [line for line in run.stdout.splitlines() if line.startswith("fatal:")]
    assert len(fatal) == 1 and "argument 'preflight_max_build_processes' is of type str" in fatal[0], run.stdout
    assert len(fatal[0]) < 1000 and "argument_spec_data" not in run.stdout, fatal[0][:2000]
    assert "preflight_kernel_events_window: must be 1 to 31622400 seconds, got -5" in preflight(
        tmp_path, "preflight_kernel_events_window=-5").stdout


# Memory pressure on a machine other test runs share is no part of these tests.
CALM = "preflight_max_memory_pressure=100"


def test_a_misspelt_role_variable_is_named_with_the_nearest_option(tmp_path):
    """Issue 39: preflight_min_avaliable_memory was ignored without a word, exit 0, the default in force."""
    run = preflight(tmp_path, "preflight_min_avaliable_memory=1TiB", '{"preflight_profiles": []}', CALM)
    assert run.returncode == 0, run.stdout
    warned = [line for line in run.stdout.splitlines() if "preflight_min_avaliable_memory" in line]
    assert len(warned) == 1 and warned[0].startswith("[WARNING]: preflight_min_avaliable_memory (did you mean "
                                                     "preflight_min_available_memory?) is no preflight_* option"), run.stdout
    assert "preflight_unknown_variables=fail" in warned[0]
    failed = preflight(tmp_path, "preflight_min_avaliable_memory=1TiB", "preflight_unknown_variables=fail")
    assert failed.returncode != 0 and "preflight_min_avaliable_memory (did you mean preflight_min_available_memory?)" \
        in failed.stdout, failed.stdout
    quiet = preflight(tmp_path, "preflight_min_avaliable_memory=1TiB", "preflight_unknown_variables=ignore",
                      '{"preflight_profiles": []}', CALM)
    assert quiet.returncode == 0 and "avaliable" not in quiet.stdout, quiet.stdout


def test_the_roles_own_variables_are_no_misspelling(tmp_path):
    run = preflight(tmp_path, "preflight_hosts=localhost", '{"preflight_profiles": []}', CALM)
    assert run.returncode == 0 and "[WARNING]" not in run.stdout, run.stdout
