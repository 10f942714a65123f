# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/_readiness/_readiness_options.py is the one declaration: everything generated from it, and the action's
spec and its documentation, must agree with it (issue 10)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import os
import sys

import pytest
import yaml

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options as table

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "tools"))
gen = importlib.import_module("gen_preflight_options")


def test_every_generated_file_matches_the_table():
    stale = gen.differing(REPO)
    assert not stale, ("%s drifted from plugins/module_utils/_readiness/_readiness_options.py: edit the table, then run "
                       "tests/tools/gen_preflight_options.py" % ", ".join(stale))


def documented_options():
    """The readiness module's options as ansible-doc sees them: its own plus its collection doc fragments."""
    from ansible_collections.gpufleet.preflight.plugins.modules import readiness as module_doc
    doc = yaml.safe_load(module_doc.DOCUMENTATION)
    options = dict(doc.get("options") or {})
    for name in doc["extends_documentation_fragment"]:
        if not name.startswith("gpufleet.preflight."):
            continue
        parts = name.split(".")  # gpufleet.preflight.<fragment>[.<variable>]
        fragment = importlib.import_module("ansible_collections.gpufleet.preflight.plugins.doc_fragments." + parts[2])
        text = getattr(fragment.ModuleDocFragment, parts[3].upper() if len(parts) > 3 else "DOCUMENTATION")
        options.update(yaml.safe_load(text).get("options") or {})
    return options


def test_the_action_spec_and_its_documentation_agree():
    # the action's ARGUMENT_SPEC is this (tests/unit/plugins/action/test_readiness.py; the action needs ansible-core,
    # which the oldest node Python these tests also run on does not have)
    ARGUMENT_SPEC = dict(table.argument_spec(), **table.TASK_SPEC)
    documented = documented_options()
    assert sorted(documented) == sorted(ARGUMENT_SPEC), "documented but not accepted, or accepted but not documented"
    for name, spec in ARGUMENT_SPEC.items():
        doc = documented[name]
        for key in ("type", "elements", "choices", "default"):
            assert doc.get(key) == spec.get(key), "readiness option %s: %s is %r in the docs, %r in the action" % (
                name, key, doc.get(key), spec.get(key))


def test_node_facts_shares_the_gathering_options_it_documents():
    """The node_facts_options fragment is the node_facts module's too: its spec must take the same defaults."""
    with open(os.path.join(REPO, "plugins", "modules", "node_facts.py")) as handle:
        source = handle.read()
    for entry in table.OPTIONS:
        if entry.get("node"):
            assert "%s=dict(" % entry["name"] in source, "node_facts does not accept %s" % entry["name"]


def role_files():
    with open(os.path.join(REPO, "roles", "preflight", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    with open(os.path.join(REPO, "roles", "preflight", "meta", "argument_specs.yml")) as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    return defaults, specs


@pytest.mark.parametrize("entry", table.OPTIONS, ids=[entry["name"] for entry in table.OPTIONS])
def test_each_option_reaches_the_role(entry):
    defaults, specs = role_files()
    var = "preflight_" + entry["name"]
    assert defaults[var] == entry["default"]
    for point in entry["roles"]:
        option = specs[point]["options"][var]
        assert option["type"] == entry["type"] and option.get("default") == (
            entry["default"] if entry["default"] is not None else None)


def test_check_takes_every_policy_option_from_its_role_variable():
    """check.yml names no policy option: readiness reads each from preflight_<option>, a role default for every one."""
    with open(os.path.join(REPO, "roles", "preflight", "tasks", "check.yml")) as handle:
        args = yaml.safe_load(handle)[0]["gpufleet.preflight.readiness"]
    assert args == {"variable_prefix": "preflight_", "ready_group": "gpufleet_preflight_ready",
                    "fail_when_not_ready": False}   # drop.yml decides, after the fleet report
    defaults, _specs = role_files()
    assert [entry["name"] for entry in table.OPTIONS if entry.get("action", True)
            and "preflight_" + entry["name"] not in defaults] == []


def test_defaults_are_a_complete_policy_and_copies():
    policy = table.defaults()
    assert policy["nvcc_arch"] == "sm_120a" and policy["build_path"] == "/tmp" and 79 in policy["fatal_xids"]
    policy["fatal_xids"].append(1)
    assert 1 not in table.default("fatal_xids")


def test_max_not_ready_is_documented_for_the_role():
    _defaults, specs = role_files()
    doc = " ".join(specs["report"]["options"]["preflight_max_not_ready"]["description"])
    assert "count" in doc and "percentage" in doc and "unreachable" in doc
