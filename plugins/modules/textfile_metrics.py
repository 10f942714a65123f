#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: textfile_metrics
short_description: Write a node's readiness verdict as node_exporter textfile metrics
version_added: 0.2.0
author: gpufleet.preflight contributors (@gpufleet)
extends_documentation_fragment:
  - gpufleet.preflight.attributes.linux
description:
  - Writes one file, O(dir)/O(file_name), for node_exporter's textfile collector
    (C(--collector.textfile.directory)), atomically - a temporary file in the same directory, then a rename - so a
    scrape never reads half of it. No sample carries a timestamp (node_exporter skips a whole file that has one).
  - Series (each with C(# HELP) and C(# TYPE)), labelled C(source) (V(playbook) here, V(health_check) from the
    node-local check) - C(gpufleet_preflight_ready) 0/1, C(gpufleet_preflight_unknown),
    C(gpufleet_preflight_check_status{check,profile,status}) 1 for the check's status and 0 for the others
    (C(profile) V(always) for the checks every profile runs, V(build), V(gpu), V(custom)),
    C(gpufleet_preflight_effective_available_memory_bytes), C(gpufleet_preflight_effective_total_memory_bytes),
    C(gpufleet_preflight_build_processes), C(gpufleet_preflight_orphaned_build_processes),
    C(gpufleet_preflight_oom_kills_total{scope}), C(gpufleet_preflight_last_check_timestamp_seconds),
    C(gpufleet_preflight_check_duration_seconds) and, with O(drain_held_back), C(gpufleet_preflight_drain_held_back).
options:
  dir:
    description:
      - node_exporter's textfile directory on the node; it must exist.
    type: path
    required: true
  file_name:
    description:
      - The file's name; must end in C(.prom). Unset - C(gpufleet_preflight_<source>.prom), so the playbook's file
        and the node-local health check's (C(gpufleet_preflight_health_check.prom)) sit side by side and neither
        overwrites the other. A C(gpufleet_preflight.prom) of an older release holding the same O(source) is removed.
    type: str
  source:
    description:
      - The C(source) label of every series, a lower-case word.
    type: str
    default: playbook
  ready:
    description:
      - The verdict.
    type: bool
    required: true
  checks:
    description:
      - The checks of the verdict (C(preflight_result.checks)), dicts with C(name), C(status) and C(profile).
    type: list
    elements: dict
    default: []
  facts:
    description:
      - The gathered facts, keyed C(gpufleet_memory) / C(memory) and so on (C(preflight_result.ansible_facts)).
    type: dict
    default: {}
  checked_at:
    description:
      - When the check ran, as C(YYYY-MM-DDTHH:MM:SSZ) (C(preflight_result.checked_at)). Unset - now.
    type: str
  duration_seconds:
    description:
      - How long the check took, in seconds.
    type: float
  drain_held_back:
    description:
      - Whether the drain circuit breaker held this node's drain back (M(gpufleet.preflight.slurm_node)'s
        C(held_back)); written as C(gpufleet_preflight_drain_held_back). Unset - not written.
    type: bool
attributes:
  check_mode:
    support: full
    details: In check mode the file is not written; the task reports changed when it would be.
seealso:
  - module: gpufleet.preflight.readiness
"""

EXAMPLES = r"""
- name: Publish this node's verdict to node_exporter
  gpufleet.preflight.textfile_metrics:
    dir: /var/lib/prometheus/node-exporter
    ready: "{{ preflight_result.ready }}"
    checks: "{{ preflight_result.checks }}"
    facts: "{{ preflight_result.ansible_facts }}"
    checked_at: "{{ preflight_result.checked_at }}"
"""

RETURN = r"""
path:
  description: The file written.
  returned: always
  type: str
  sample: /var/lib/prometheus/node-exporter/gpufleet_preflight_playbook.prom
metrics:
  description: The text written.
  returned: always
  type: str
"""

import calendar
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _metrics

ARGUMENT_SPEC = dict(
    dir=dict(type="path", required=True),
    file_name=dict(type="str"),
    source=dict(type="str", default="playbook"),
    ready=dict(type="bool", required=True),
    checks=dict(type="list", elements="dict", default=[]),
    facts=dict(type="dict", default={}),
    checked_at=dict(type="str"),
    duration_seconds=dict(type="float"),
    drain_held_back=dict(type="bool"),
)


def epoch(text):
    """``2026-12-01T20:00:00Z`` -> seconds; None when it is not that form."""
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except (TypeError, ValueError):
        return None


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    error = None
    when = time.time() if params["checked_at"] is None else epoch(params["checked_at"])
    if when is None:
        error = "checked_at: %r is not a time like 2026-12-01T20:00:00Z" % (params["checked_at"],)
    facts = dict((key[len("gpufleet_"):] if key.startswith("gpufleet_") else key, value) for key, value in params["facts"].items())
    verdict = dict(ready=params["ready"], checks=params["checks"], facts=facts, checked_at_epoch=when,
                   duration_seconds=params["duration_seconds"], drain_held_back=params["drain_held_back"])
    text = path = None
    if error is None:
        try:
            params["file_name"] = params["file_name"] or _metrics.default_file(params["source"])
            _metrics.validate_file_name(params["file_name"])
            text = _metrics.render(verdict, params["source"])
            path = os.path.join(params["dir"], params["file_name"])
            if not os.path.isdir(params["dir"]):
                raise ValueError("dir: %s does not exist or is not a directory (node_exporter's textfile directory)" % params["dir"])
        except ValueError as exc:
            error = str(exc)
    if error:
        module.fail_json(msg=error)
    changed = _metrics.read_current(path) != text
    problem = None
    if changed and not module.check_mode:
        try:
            _metrics.write_atomic(params["dir"], text, params["file_name"])
        except (ValueError, OSError) as exc:
            problem = "%s: not written: %s" % (path, exc)
    if problem:
        module.fail_json(msg=problem)
    module.exit_json(changed=changed, path=path, metrics=text)


if __name__ == "__main__":
    main()
