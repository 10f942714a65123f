#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: readiness
short_description: Decide whether a node is ready for a heavy CUDA build, in one round trip
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - Runs M(gpufleet.preflight.node_facts) B(once) on the node with only the subsets the policy needs, then evaluates
    the policy on the controller.
  - Returns RV(ready), one entry per check in RV(checks), sets the fact C(gpufleet_readiness) (and the gathered
    C(gpufleet_memory) and C(gpufleet_build_processes) facts; every gathered C(gpufleet_*) fact with O(full_facts=true)),
    and fails the host when it is not ready unless O(fail_when_not_ready=false).
  - 'The failure message names every failed check in words a person can act on, for example
    C(3 build processes still running: ninja (pid 115, orphaned, 2h 03m\), cc1plus x2).'
  - C(msg) is the console's short form of RV(message) - checks failing for one cause (a missing C(nvidia-smi) fails
    every GPU check) are named together and the cause is said once, each cut at 1000 characters (saying so; only
    node-made text such as GPU names or kernel lines is that long); RV(message) and RV(checks) keep every word for
    the reports.
  - When it fails the host, at the default verbosity the result holds only RV(ready), C(msg), RV(failed_checks) and
    the timing, so the console shows each failed cause and its fix once rather than kilobytes of facts, policy and
    the same messages again; with C(-v), or with O(fail_when_not_ready=false)
    (as the C(gpufleet.preflight.preflight) role runs it), the result is complete.
  - Checks of a profile that is not selected are reported with status C(skipped) and why; a check whose facts
    could not be gathered fails with status C(unknown) and why; it never passes silently.
  - When C(node_facts) cannot run on the node at all (a wrong C(ansible_python_interpreter), a module crash), the
    host fails with the node's own message; with O(fail_when_not_ready=false) it is instead a verdict of its own,
    RV(ready=false) with the one check C(readiness) of status C(unknown) saying why, so the role's fleet report and
    gate still cover it.
  - This is an action plugin; the module file holds its documentation. The C(gpufleet.preflight.preflight) role wraps it.
  - Its options are declared once, in C(plugins/module_utils/_readiness/_readiness_options.py), from which this documentation's
    fragments and the role's variables are generated.
options:
  variable_prefix:
    description:
      - Take each option this task leaves out from the variable named this prefix and the option's name, where that
        variable is set and not null (with V(preflight_), O(min_available_memory) comes from C(preflight_min_available_memory)).
        An option the task sets wins.
      - A policy kept in C(group_vars) and C(host_vars) then needs no task argument per option. A refusal names the
        variable. The C(gpufleet.preflight.preflight) role passes V(preflight_), its variables' prefix.
      - 'It is cheaper too: each C({{ var }}) task argument is a template compiled again in every host''s worker.'
    type: str
  ready_group:
    description:
      - A group this host joins when it is ready (the way M(ansible.builtin.group_by) adds it), for the later plays
        of the run to target. A host that is not ready, or unreachable, does not join it.
      - The C(gpufleet.preflight.preflight) role passes C(gpufleet_preflight_ready).
    type: str
extends_documentation_fragment:
  - gpufleet.preflight.readiness_options
  - gpufleet.preflight.active_result_options
  - gpufleet.preflight.node_facts_options
  - gpufleet.preflight.attributes
  - gpufleet.preflight.attributes.action
  - gpufleet.preflight.attributes.facts
attributes:
  check_mode:
    support: full
    details: Only reads the node.
seealso:
  - module: gpufleet.preflight.node_facts
  - module: gpufleet.preflight.build_processes
"""

EXAMPLES = r"""
- name: Is this node ready to resume the build?
  gpufleet.preflight.readiness:
    min_available_memory: 64GiB
    max_build_processes: 0
    profiles: [build]

- name: Wait up to a minute for a node that was just restarted
  gpufleet.preflight.readiness:
    min_available_memory: 0.8
    wait: 60
    interval: 5

- name: Check against the policy in group_vars and host_vars (preflight_min_available_memory, ...)
  gpufleet.preflight.readiness:
    variable_prefix: preflight_
    ready_group: ready_to_build

- name: Add a custom check, and decide later
  gpufleet.preflight.readiness:
    custom_checks:
      - name: gpus_not_hot
        query: "gpus.devices[?temperature > `85`] | length(@)"
        equals: 0
        message: a GPU is hotter than 85 C
    fail_when_not_ready: false
  register: verdict
"""

RETURN = r"""
ready:
  description: Whether every applied check passed.
  returned: success
  type: bool
  sample: false
message:
  description: The verdict in words; names each failed check, every message in full (C(msg) is its short form).
  returned: success
  type: str
  sample: "not ready: build_processes: 3 build processes still running: ninja (pid 115, orphaned, 2h 03m), cc1plus x2"
checks:
  description: One entry per check.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The check's name.
      type: str
    ok:
      description: Whether it passed (skipped checks count as passed).
      type: bool
    status:
      description: V(ok), V(failed), V(unknown) (facts missing) or V(skipped) (profile not selected).
      type: str
    observed:
      description: What the node showed.
      type: raw
    expected:
      description: What the policy asks for.
      type: raw
    message:
      description: What to do about it, when it failed.
      type: str
    profile:
      description: V(always) (the checks every profile runs), V(build), V(gpu) or V(custom).
      type: str
failed_checks:
  description: Names of the checks that failed or were unknown.
  returned: success
  type: list
  elements: str
waited_seconds:
  description: How long the node was re-checked before the verdict.
  returned: success
  type: float
attempts:
  description: How many times the node's facts were gathered.
  returned: success
  type: int
subsets:
  description: The node_facts subsets gathered for this policy.
  returned: success
  type: list
  elements: str
"""
