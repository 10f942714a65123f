# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The admission launcher's config, built from its own DEFAULTS (issue 26 item 3)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.preflight.plugins.filter import admission_config as admission_config_plugin
from ansible_collections.gpufleet.preflight.plugins.filter.admission_config import admission_config
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_settings as _admission

GIB = 1024 ** 3


def test_defaults_come_from_the_launcher():
    config = admission_config({"state_dir": "/b/s", "default_bytes": "5GiB", "budget_bytes": None})
    assert config == dict(_admission.DEFAULTS, state_dir="/b/s", default_bytes=5 * GIB)
    assert config["reserve_bytes"] == _admission.DEFAULTS["reserve_bytes"] and config["margin"] == _admission.DEFAULTS["margin"]


@pytest.mark.parametrize("settings, named", [
    ({"margn": 1.2}, "unknown admission setting(s) margn"),
    ({"budget_bytes": "64GB"}, "budget_bytes: '64GB' is ambiguous"),
    ({"reserve_bytes": "5 GiB"}, "reserve_bytes"),
    ({"margin": 0.5}, "margin"),
    ({"default_times": "two"}, "default_times"),
    ({"offline_dir": ["/data/deps"]}, "offline_dir: ['/data/deps'] is not a string"),
    ("nope", "expects a dict"),
])
def test_refused_naming_what_to_fix(settings, named):
    with pytest.raises(AnsibleFilterError) as refused:
        admission_config(settings)
    assert named in str(refused.value)


def test_the_filters_documentation_names_every_setting():
    """DEFAULTS is the one registry of the launcher's settings; the filter's description names each (a setting added
    there and not here was undocumented)."""
    missing = [name for name in _admission.DEFAULTS if "C(%s)" % name not in admission_config_plugin.DOCUMENTATION]
    assert missing == []
