#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: health_check_bundle
short_description: Build the node-local health check program and validate its policy (controller side)
version_added: 0.2.0
author: gpufleet.preflight contributors (@gpufleet)
extends_documentation_fragment:
  - gpufleet.preflight.attributes
  - gpufleet.preflight.attributes.action
description:
  - Writes, on the controller, one zip application holding the collection's node-side health check
    (C(module_utils/_node_check/_health_check.py)) and every module it imports - the same collectors and checks the
    M(gpufleet.preflight.readiness) action uses, and the C(ansible.module_utils) files they need - found by reading
    their imports, as Ansiballz does for a module. It runs with C(python3 -I health_check.pyz) on Python 3.8 or later,
    standard library only.
  - Validates O(policy) against the readiness option table and returns it complete (defaults filled in), so a typo
    fails here, naming the option, not on every node at every run.
  - Used by the C(gpufleet.preflight.health_check) role.
options:
  dest:
    description:
      - Path on the controller for the zip application; written atomically, unchanged when it is the same.
    type: path
    required: true
  policy:
    description:
      - Readiness options by name (those of M(gpufleet.preflight.readiness) except C(wait), C(interval) and
        C(fail_when_not_ready)).
    type: dict
    default: {}
  deadline_seconds:
    description:
      - The deadline of one whole run of the program (facts, Slurm, metrics). Refused when it does not fit
        O(schedule) (under slurmd at most 55 - slurmd kills its HealthCheckProgram at 60 s; from cron or a timer
        short of the next run) or when the policy's C(gpu_timeout) cannot fit in it with the share kept for Slurm's
        calls (20 s) and the rest (3 s).
    type: float
    default: 50
  schedule:
    description:
      - What runs the program - V(slurm) (slurmd's HealthCheckProgram), V(cron), V(systemd) (a timer) or V(none).
    type: str
    choices: [none, slurm, cron, systemd]
    default: none
  slurm:
    description:
      - Whether the program drains and resumes in Slurm (its share of the deadline is kept). V(slurm) schedules always do.
    type: bool
    default: false
  interval_minutes:
    description:
      - Minutes between runs from cron or a timer.
    type: int
    default: 5
  remediation:
    description:
      - The remediation ladder (beyond the drain and the log bundle), checked here and returned complete for the
        program's config. Each step is opt-in per fault class; every step done is recorded in
        C(<state_dir>/remediation-<node>.json); the program's C(--check) says what it would do and does nothing.
      - C(enabled) (bool, default V(false)) - run the ladder on a run that finds the node not ready.
      - C(reset_classes) (list, default V([])) - fault classes whose GPU is reset (C(nvidia-smi -r -i N)) when no
        process uses it, read again right before. Classes - the Xid catalogue's V(reset_gpu), V(reboot), V(nvlink),
        V(contact_support), V(check_mechanicals); V(row_remap) (a pending row remap); V(sxid) (a fatal NVSwitch error).
      - C(reboot_classes) (list, default V([])) - fault classes that reboot the node through Slurm
        (C(scontrol reboot ASAP nextstate=RESUME reason=...)); back in service when slurmd registers and its health
        check passes.
      - C(escalate_after) (int, default V(3)) - the occurrence of the same fault (the same Xid on the same GPU) within
        C(window_seconds) that escalates instead of another reset or reboot; a pending state still there after its
        step escalates at once.
      - C(window_seconds) (int, default V(604800), a week).
      - C(ticket_command) (list of arguments, an absolute path first; default V(null)) - run on escalation with the
        fault as JSON on its input; V(null) - the escalation goes to the system log.
      - "C(reboot_reason) (str, default V(gpufleet: reboot:)) - the start of Slurm's reason for the reboot."
      - C(keep) (int, default V(200)) - history records kept beyond the window.
    type: dict
    default: {}
attributes:
  check_mode:
    support: none
notes:
  - An action plugin; it runs on the controller (delegate it to C(localhost) for clarity).
seealso:
  - module: gpufleet.preflight.readiness
  - module: gpufleet.preflight.slurm_node
"""

EXAMPLES = r"""
- name: Build the health check
  gpufleet.preflight.health_check_bundle:
    dest: /tmp/health_check.pyz
    policy:
      profiles: [build]
      min_available_memory: 64GiB
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
dest:
  description: The file written.
  returned: always
  type: str
modules:
  description: The modules in the zip application.
  returned: always
  type: list
  elements: str
size:
  description: Its size in bytes.
  returned: always
  type: int
policy:
  description: The policy, complete, as the program's config takes it.
  returned: always
  type: dict
remediation:
  description: The remediation settings, complete, as the program's config takes them.
  returned: always
  type: dict
"""
