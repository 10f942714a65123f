# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health check as Slurm's Prolog / Epilog (issue 38 item 3): the fast subset, a budget within Slurm's limits,
and an exit code that only stops a job when this collection drained the node.

Slurm requeues (held) a batch job whose Prolog exits non-zero and drains the node itself, whatever our circuit
breaker says; so the job-time run exits non-zero only when the node is drained by us now (drained by this run, or
already ours). A node the breaker held back, a check that could not run (a previous run still holds the lock, a
broken config) or a Slurm error lets the job start and says why on stderr: one bad config must never take every node
out through Slurm's own Prolog-failure drains. The budget: a batch job must launch within ``BatchStartTimeout``
(default 10 s, slurm.conf(5)) and ``PrologEpilogTimeout`` waits forever by default, so the run's deadline is
``PROLOG_DEADLINE`` (9 s): facts first, ``SLURM_RESERVE`` seconds kept for the drain.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

JOB_MODES = ("prolog", "epilog")
PROLOG_DEADLINE = 9
SLURM_RESERVE = 2.5
# The opt-in probes that take seconds (nvidia-smi -q, nvlink, DCGM diagnostics): never before a job.
SLOW_OPTIONS = ("check_nvlink", "check_fabric", "check_gpu_recovery", "check_dcgm_diag")


def fast_policy(policy):
    """A copy of the policy with the slow probes off: the fast subset a job waits for."""
    fast = dict(policy)
    for name in SLOW_OPTIONS:
        if name in fast:
            fast[name] = False
    return fast


def for_job(config):
    """The config for a job-time run: the fast policy, the deadline at most ``PROLOG_DEADLINE`` seconds."""
    job = dict(config)
    job["policy"] = fast_policy(config["policy"])
    job["deadline_seconds"] = min(float(config.get("deadline_seconds") or PROLOG_DEADLINE), PROLOG_DEADLINE)
    return job


def exit_code(outcome):
    """1 (Slurm requeues the job, the node stays out) only when the node is drained by us now; else 0."""
    if not outcome or outcome.get("error") or outcome.get("held_back"):
        return 0
    if outcome.get("action") == "drain":
        return 1
    return 1 if "drained by us already" in (outcome.get("message") or "") else 0
