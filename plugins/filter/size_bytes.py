# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: size_bytes
short_description: A size a person wrote (64GiB, 64G, 1048576) in bytes, by the collection's one size rule
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - The rule every size option of the collection follows (readiness, guarded_build, build_jobs, the roles' variables)
    - binary units (V(64GiB), V(64Gi), V(64G), all powers of 1024) or a whole number of bytes.
  - Refused, naming O(option) - decimal units such as V(64GB) (10^9 or 2^30 bytes?), a space inside (V(5 GiB)),
    a leading dot (V(.5GiB)), negative, fractional or non-finite numbers, booleans.
  - The roles validate their size variables with this filter and the P(gpufleet.preflight.valid_size#test) test,
    so a value the role accepts is one the modules accept.
options:
  _input:
    description: The size, a string or a whole number of bytes.
    type: raw
    required: true
  option:
    description: The variable or option name the error message names.
    type: str
    default: size
"""

EXAMPLES = r"""
- name: The memory per nvcc thread, in bytes
  ansible.builtin.debug:
    msg: "{{ sgl_kernel_memory_per_thread | gpufleet.preflight.size_bytes('sgl_kernel_memory_per_thread') }}"
"""

RETURN = r"""
_value:
  description: The size in bytes.
  type: int
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import parse_size_option


def size_bytes(value, option="size"):
    """``'5GiB'`` -> ``5368709120``; AnsibleFilterError naming ``option`` otherwise."""
    problem = None
    try:
        return parse_size_option(option, value)
    except ValueError as exc:
        problem = str(exc)
    raise AnsibleFilterError(problem)


class FilterModule(object):
    def filters(self):
        return {"size_bytes": size_bytes}
