# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules every plugin follows, read from the source's syntax tree (issue 21 item 4).

- ``fail_json`` is never called inside an ``except`` block: ansible-core attaches the handled exception's traceback
  to the result, so a clear message about bad input would come with a traceback. Store the message, leave the block,
  then fail.
- NaN and infinity are recognised in one place, ``module_utils/_values.py`` (``non_finite``, ``first_non_finite``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os

import pytest

from ansible_collections.gpufleet.preflight.tests.unit.plugins.conftest import COLLECTORS, loaded_module_utils

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PLUGINS = os.path.join(REPO, "plugins")


def python_files():
    for dirpath, _dirs, files in os.walk(PLUGINS):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path) as handle:
                    yield os.path.relpath(path, REPO), ast.parse(handle.read(), path)


def test_fail_json_is_never_called_inside_an_except_block():
    found = []
    for path, tree in python_files():
        for handler in ast.walk(tree):
            if isinstance(handler, ast.ExceptHandler):
                for node in ast.walk(handler):
                    if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "fail_json":
                        found.append("%s:%d" % (path, node.lineno))
    assert not found, "fail_json inside an except block (store the message, fail after the block): " + ", ".join(found)


def test_nan_and_infinity_are_recognised_only_in_values():
    allowed = {"plugins/module_utils/_values.py",
               "plugins/module_utils/_readiness/_metrics.py",  # writes NaN for Prometheus
               # the admission launcher runs beside the build as three stdlib files copied there: it imports nothing
               "plugins/module_utils/_build/_admission_settings.py"}
    found = []
    for path, tree in python_files():
        if path in allowed:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("isfinite", "isnan", "isinf"):
                found.append("%s:%d %s" % (path, node.lineno, node.attr))
    assert not found, "use _values.non_finite / first_non_finite instead: " + ", ".join(found)


@pytest.mark.parametrize("module", ["action.readiness", "action.fleet_reports", "action.build_watch", "filter.fleet_report",
                                    "filter.build_jobs", "plugin_utils._report", "plugin_utils._html_report"])
def test_the_controller_imports_no_node_collector(module):
    loaded = loaded_module_utils(module)
    assert not COLLECTORS & loaded, "%s imports the node collectors %s (put the constant in _constants)" % (
        module, ", ".join(sorted(COLLECTORS & loaded)))
