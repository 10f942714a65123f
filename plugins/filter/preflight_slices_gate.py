# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
---
name: preflight_slices_gate
short_description: One fleet gate over the preflight verdicts of AWX job slices
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - With AWX job slicing each slice job runs the preflight on its share of the inventory and decides its own gate.
    Given C(awx_job_id) (AWX sets it in every job), the preflight role's C(report) entry point also publishes the
    slice's verdicts as C(gpufleet_preflight_slice_<job id>) (C(ready), C(not_ready), C(total)), one key per slice, so
    AWX's merge of the slices' artifacts keeps them all for the next workflow node.
  - This filter takes those variables (any dict holding them, such as C(vars) or the artifacts) and decides once over
    the whole fleet, with the same rule as O(max_not_ready) of the preflight (C(preflight_max_not_ready)); a host
    in several slices is ready only when every slice says so. A malformed entry, no entry at all, or fewer slices
    than O(expected_slices) stops.
  - C(playbooks/slices_gate.yml) runs it as a workflow node after the sliced job.
options:
  _input:
    description: A dict holding the C(gpufleet_preflight_slice_*) entries (other keys are ignored).
    type: dict
    required: true
  max_not_ready:
    description: The most hosts of the fleet that may be not ready, a count like V(2) or a percentage like V(25%).
    type: raw
  expected_slices:
    description: How many slices the job template has (C(job_slice_count)); fewer entries stop the gate.
    type: int
"""

EXAMPLES = r"""
- name: Decide once over every slice
  ansible.builtin.set_fact:
    fleet: "{{ vars | gpufleet.preflight.preflight_slices_gate(max_not_ready='10%', expected_slices=4) }}"
"""

RETURN = r"""
_value:
  description: C(gate) (decision, abort, reason, not_ready, total, allowed), C(ready), C(not_ready), C(total),
    C(slices) (the slice ids merged) and C(malformed) (entries refused).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _slices


def preflight_slices_gate(variables, max_not_ready=None, expected_slices=None):
    if not isinstance(variables, dict):
        raise AnsibleFilterError("preflight_slices_gate: expects a dict holding gpufleet_preflight_slice_* entries, got %s"
                                 % type(variables).__name__)
    try:
        return _slices.merge(dict(variables), max_not_ready, expected_slices=expected_slices)
    except ValueError as exc:
        raise AnsibleFilterError("preflight_slices_gate: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"preflight_slices_gate": preflight_slices_gate}
