# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: valid_form
short_description: Whether a value is written the way the collection's modules read it (version, GPU architecture, ...)
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - The same rules the readiness policy and M(gpufleet.preflight.guarded_build) apply to their options
    (C(plugins/module_utils/_versions.py)), so the roles' C(validate.yml) accept exactly what the modules accept.
  - Only text can have a form; a number such as V(3.5) written without quotes is not a version here.
options:
  _input:
    description: The value to test.
    type: raw
    required: true
  form:
    description:
      - V(version) - 1 to 4 dot-separated numbers (V(3.18), V(570.86.15)).
      - V(gpu_arch) - an nvcc architecture (V(sm_120a), V(compute_120)).
      - V(compute_capability) - V(12.0), V(10.0).
      - V(cuda_arch_list) - a C(TORCH_CUDA_ARCH_LIST) (V(12.0a), V(9.0 12.0+PTX), V(9.0;12.0a)).
    type: str
    required: true
    choices: [version, gpu_arch, compute_capability, cuda_arch_list]
"""

EXAMPLES = r"""
- name: Refuse a CMake minimum that is not a version
  ansible.builtin.assert:
    that: build_deps_cmake_min_version is gpufleet.preflight.valid_form('version')
"""

RETURN = r"""
_value:
  description: Whether the value is written in that form.
  type: bool
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.preflight.plugins.module_utils._versions import FORMS, has_form


def valid_form(value, form):
    if form not in FORMS:
        raise AnsibleFilterError("valid_form: form %r is not one of %s" % (form, ", ".join(sorted(FORMS))))
    return has_form(form, value)


class TestModule(object):
    def tests(self):
        return {"valid_form": valid_form}
