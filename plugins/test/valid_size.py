# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: valid_size
short_description: Whether a value is a size by the collection's one size rule (64GiB, 64G, a number of bytes)
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - True for what P(gpufleet.preflight.size_bytes#filter) converts - binary units (V(64GiB), V(64Gi), V(64G)) or a
    whole number of bytes - and false for V(64GB), V(5 GiB), V(.5GiB), negative, fractional or non-finite numbers.
  - The roles' C(validate.yml) use it instead of their own regular expressions, so the role and the modules never
    disagree on what a size is.
options:
  _input:
    description: The value to test.
    type: raw
    required: true
  positive:
    description: Also require more than 0 bytes.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Refuse a memory per thread that is not a size above 0
  ansible.builtin.assert:
    that: sgl_kernel_memory_per_thread is gpufleet.preflight.valid_size(positive=true)
"""

RETURN = r"""
_value:
  description: Whether the value is a size (above 0 with O(positive)).
  type: bool
"""

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import parse_size_option


def valid_size(value, positive=False):
    try:
        size = parse_size_option("size", value)
    except ValueError:
        return False
    return size > 0 or not positive


class TestModule(object):
    def tests(self):
        return {"valid_size": valid_size}
