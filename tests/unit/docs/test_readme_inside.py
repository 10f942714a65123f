# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The "What is inside" reference (docs/reference.md; README.md's section until issue 39) names every module, action,
filter (each a file may hold), lookup, test plugin, role and playbook the collection ships
(issue 27 item 4: the health_check role and slurm_node, textfile_metrics, health_check_bundle were missing; issue 40:
filters were not checked, and admission_config was missing)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import os
import re

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def inside():
    with open(os.path.join(REPO, "docs", "reference.md")) as handle:
        text = handle.read()
    match = re.search(r"^## What is inside\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, "docs/reference.md has no '## What is inside' section"
    return match.group(1)


def filters():
    """Every filter's name: a filter file may hold several (fleet_report.py: fleet_table, fleet_gate, ...)."""
    names = set()
    for name in os.listdir(os.path.join(REPO, "plugins", "filter")):
        if name.endswith(".py") and name != "__init__.py":
            module = importlib.import_module("ansible_collections.gpufleet.preflight.plugins.filter." + name[:-3])
            names.update(module.FilterModule().filters())
    return names


def shipped():
    names = set()
    for kind in ("modules", "action", "test", "lookup"):
        folder = os.path.join(REPO, "plugins", kind)
        names.update("gpufleet.preflight." + n[:-3] for n in os.listdir(folder) if n.endswith(".py") and n != "__init__.py")
    names.update("gpufleet.preflight." + name for name in filters())
    names.update(n for n in os.listdir(os.path.join(REPO, "roles")) if os.path.isdir(os.path.join(REPO, "roles", n)))
    for dirpath, _dirs, files in os.walk(os.path.join(REPO, "playbooks")):
        if os.path.basename(dirpath) == "vars":
            continue
        rel = os.path.relpath(dirpath, os.path.join(REPO, "playbooks"))
        names.update(os.path.normpath(os.path.join(rel, n)) for n in files if n.endswith(".yml"))
    return names


def test_what_is_inside_names_everything_shipped():
    section = inside()
    missing = sorted(name for name in shipped() if "`%s`" % name not in section)
    assert not missing, "docs/reference.md 'What is inside' does not list: %s" % ", ".join(missing)
