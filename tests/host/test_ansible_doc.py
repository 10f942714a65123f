# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`ansible-doc` renders every plugin and role of the collection, found from the tree so none is forgotten."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import importlib
import json
import os
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _names(pattern):
    return sorted(os.path.splitext(os.path.basename(path))[0] for path in glob.glob(os.path.join(REPO, pattern))
                  if not os.path.basename(path).startswith("_"))


def _filters():
    # One filter file may define several filters: ask each file's FilterModule which.
    names = []
    for module in _names("plugins/filter/*.py"):
        plugin = importlib.import_module("ansible_collections.gpufleet.preflight.plugins.filter." + module)
        names.extend(name.split(".")[-1] for name in plugin.FilterModule().filters())
    return sorted(names)


PLUGINS = ([("module", name) for name in _names("plugins/modules/*.py")] + [("filter", name) for name in _filters()]
           + [("lookup", name) for name in _names("plugins/lookup/*.py")])
ROLES = sorted(os.path.basename(path) for path in glob.glob(os.path.join(REPO, "roles", "*")) if os.path.isdir(path))


def ansible_doc(plugin_type, names):
    run = subprocess.run(["ansible-doc", "--json", "-t", plugin_type] + ["gpufleet.preflight." + name for name in names],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert run.returncode == 0, run.stderr
    assert "WARNING" not in run.stderr and "ERROR" not in run.stderr, run.stderr
    return json.loads(run.stdout)


def _options_without_description(options, prefix=""):
    missing = []
    for name, spec in (options or {}).items():
        if not spec.get("description"):
            missing.append(prefix + name)
        missing.extend(_options_without_description(spec.get("suboptions"), prefix + name + "."))
    return missing


def test_every_plugin_file_is_found():
    assert ("module", "node_facts") in PLUGINS and ("module", "readiness") in PLUGINS
    assert ("filter", "fleet_report") in PLUGINS and ("filter", "build_jobs") in PLUGINS
    assert ("lookup", "play_hosts") in PLUGINS
    assert ROLES == ["build_deps", "health_check", "preflight", "sgl_kernel"]


@pytest.mark.parametrize("plugin_type", ["module", "filter", "lookup"])
def test_ansible_doc_renders_every_plugin(plugin_type):
    names = [name for kind, name in PLUGINS if kind == plugin_type]
    docs = ansible_doc(plugin_type, names)
    assert sorted(docs) == sorted("gpufleet.preflight." + name for name in names)
    for fqcn, entry in docs.items():
        doc = entry["doc"]
        assert doc.get("short_description"), fqcn
        assert doc.get("description"), fqcn
        assert entry.get("examples"), "%s has no EXAMPLES" % fqcn
        assert entry.get("return"), "%s documents no return values" % fqcn
        assert _options_without_description(doc.get("options")) == [], fqcn


def test_shared_fragment_reaches_node_facts_and_readiness():
    docs = ansible_doc("module", ["node_facts", "readiness"])
    for fqcn in ("gpufleet.preflight.node_facts", "gpufleet.preflight.readiness"):
        options = docs[fqcn]["doc"]["options"]
        assert options["gpu_timeout"]["default"] == 10 and options["kernel_events_window"]["default"] == 86400, fqcn
        assert "toolchain_python" in options and "build_process_patterns" in options, fqcn


def test_ansible_doc_renders_every_role_entry_point():
    docs = ansible_doc("role", ROLES)
    assert sorted(docs) == ["gpufleet.preflight." + role for role in ROLES]
    for fqcn, entry in docs.items():
        entry_points = entry["entry_points"]
        assert "main" in entry_points, fqcn
        for point, spec in entry_points.items():
            assert spec.get("short_description"), (fqcn, point)
            assert _options_without_description(spec.get("options")) == [], (fqcn, point)
