# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: admission_config
short_description: The memory-admission launcher's config, built from the launcher's own defaults
version_added: 0.1.0
author: gpufleet.preflight contributors (@gpufleet)
description:
  - Builds the JSON settings C(gpufleet_admit.py) (plugins/module_utils/_build/_admission.py) reads, starting from the
    launcher's own C(DEFAULTS) - one declaration, so a role or a play never repeats the launcher's reserve or margin.
  - Refuses an unknown setting naming it and the known ones, and a size the collection's size rule refuses (decimal
    units such as V(64GB), a space inside); sizes come back in bytes.
  - Settings - C(state_dir), C(peaks_path), C(seed_peaks) (other nodes' peaks files, read only),
    C(census) (census files - measured peaks shipped for known trees - for a matching tree's sources nothing learned
    or seeded), C(root), C(offline_dir) (FetchContent's offline sources - a source under it is keyed
    C(offline/<folder>/<path>), as the census keys it, wherever the folder is), C(tree)
    (the tree's identity - name, version, archs - so keys of different trees never mix), C(budget_bytes) (null - the
    build cgroup's limit), C(reserve_bytes), C(default_bytes) (a source never seen, per nvcc thread; guarded_build's
    O(gpufleet.preflight.guarded_build#module:memory_per_thread) default), C(default_times), C(margin), C(cpus) (null -
    the CPUs the launcher may run on), C(poll_seconds), C(settle_seconds) (the lull in arrivals a decision waits for),
    C(sample_seconds), C(threads_per_source) (bool), C(max_threads), C(freeze) (bool - freeze the compile furthest from
    done instead of starting unknown ones one at a time), C(oversize_wait_seconds) (how long a learned source above the
    live budget waits before it fails naming its need). A null value keeps the default.
options:
  _input:
    description: The settings to change from the defaults.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The launcher's settings for this build
  ansible.builtin.copy:
    dest: "{{ build_dir }}/gpufleet-admission/config.json"
    content: "{{ {'state_dir': build_dir ~ '/gpufleet-admission', 'default_bytes': '5GiB'}
                 | gpufleet.preflight.admission_config | to_nice_json }}"
    mode: "0644"
"""

RETURN = r"""
_value:
  description: Every setting of the launcher, sizes in bytes.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_string
from ansible.module_utils.six import iteritems

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_settings as _settings_rule
from ansible_collections.gpufleet.preflight.plugins.module_utils._human import parse_size_option


def admission_config(settings):
    """``{'default_bytes': '5GiB'}`` -> every launcher setting, checked; AnsibleFilterError naming what is wrong."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError("admission_config: expects a dict of settings, got %s" % type(settings).__name__)
    # Ansible hands strings as its own str subclasses: plain str, so the stdlib launcher's checks read them right
    plain = dict((str(key), str(value) if is_string(value) else value) for key, value in iteritems(settings)
                 if value is not None)
    problem = None
    try:
        for name in _settings_rule.SIZES:   # the project's size rule itself, not only the launcher's copy of it
            if name in plain:
                plain[name] = parse_size_option(name, plain[name])
        return _settings_rule.checked_config(plain)
    except ValueError as exc:
        problem = "admission_config: %s" % exc
    raise AnsibleFilterError(problem)


class FilterModule(object):
    def filters(self):
        return {"admission_config": admission_config}
