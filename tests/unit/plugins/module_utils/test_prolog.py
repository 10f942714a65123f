# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job-time run (Slurm Prolog/Epilog, issue 38.3): the fast subset, the budget, and when it stops a job."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _hc_runtime, _prolog
from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _health_check
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options


def test_fast_policy_turns_the_slow_probes_off_and_keeps_the_rest():
    policy = dict(_readiness_options.defaults(), check_nvlink=True, check_fabric=True, check_gpu_recovery=True,
                  check_dcgm_diag=True, expected_gpus=4)
    fast = _prolog.fast_policy(policy)
    assert [fast[name] for name in _prolog.SLOW_OPTIONS] == [False] * 4
    assert fast["expected_gpus"] == 4 and policy["check_nvlink"] is True   # a copy


# deadline configured, deadline for the job
DEADLINES = [(50, 9), (6, 6), (None, 9)]


@pytest.mark.parametrize("given, expected", DEADLINES)
def test_the_job_budget_fits_batch_start_timeout(given, expected):
    config = _prolog.for_job(dict(policy={}, deadline_seconds=given))
    assert config["deadline_seconds"] == expected and expected < 10   # BatchStartTimeout's default
    clock = iter([0.0]).__next__
    deadline = _hc_runtime.Deadline(config["deadline_seconds"], True, clock=clock, reserve=_prolog.SLURM_RESERVE)
    assert deadline.facts_end > 0 and deadline.end - deadline.facts_end == _prolog.SLURM_RESERVE


# the Slurm outcome, the exit code (1: Slurm requeues the job and the node stays out)
OUTCOMES = [
    (dict(action="drain", message="n: not ready; draining: gpufleet: x"), 1),
    (dict(action="none", message="n: not ready; drained by us already, reason kept while ..."), 1),
    (dict(action="none", held_back=True, message="n: not ready, NOT drained: the drain circuit breaker holds"), 0),
    (dict(action="none", error="n: slurmctld is unreachable", message="..."), 0),
    (dict(action="none", message="n: not ready; already drained by someone else"), 0),
    (dict(action="none", message="n: ready and not drained (allocated)"), 0),
    (None, 0),
]


@pytest.mark.parametrize("outcome, code", OUTCOMES)
def test_only_our_drain_stops_the_job(outcome, code):
    assert _prolog.exit_code(outcome) == code


def test_job_modes_are_accepted():
    assert _health_check.parse_args(["--mode", "prolog"], {})[0] == "prolog"
    assert _health_check.parse_args(["--mode", "epilog"], {"SLURMD_NODENAME": "n"})[0] == "epilog"


def test_a_job_time_run_that_cannot_check_lets_the_job_start(tmp_path):
    import io
    out, err = io.StringIO(), io.StringIO()
    code = _health_check.main(["--mode", "prolog", "--config", str(tmp_path / "missing.json")], environ={},
                              out=out, err=err, as_program=False)
    assert code == 0 and out.getvalue().startswith("unknown: config")
