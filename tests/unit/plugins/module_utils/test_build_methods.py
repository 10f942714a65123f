# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/_build/_build_methods.py: the one confinement registry, and every place a method must appear
(issue 26 item 2): a Confinement class never registered, or registered without its documented choice, fails here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import inspect
import os

import yaml

from ansible_collections.gpufleet.preflight.plugins.doc_fragments import guarded_build_options
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _build_methods
from ansible_collections.gpufleet.preflight.plugins.module_utils._build._confinement import Confinement
from ansible_collections.gpufleet.preflight.plugins.modules.guarded_build import ARGUMENT_SPEC

BUILD = os.path.join(os.path.dirname(os.path.abspath(_build_methods.__file__)))
PACKAGE = "ansible_collections.gpufleet.preflight.plugins.module_utils._build."


def confinement_classes():
    """Every Confinement subclass defined in a file of module_utils/_build (the base class itself is ``none``)."""
    found = set()
    for name in sorted(os.listdir(BUILD)):
        if name.startswith("_") and name.endswith(".py") and name != "__init__.py":
            module = importlib.import_module(PACKAGE + name[:-3])
            found.update(cls for _n, cls in inspect.getmembers(module, inspect.isclass)
                         if issubclass(cls, Confinement) and cls.__module__ == module.__name__)
    return found


def test_every_confinement_class_is_registered():
    missing = sorted("%s.%s" % (cls.__module__.rsplit(".", 1)[-1], cls.__name__)
                     for cls in confinement_classes() - set(_build_methods.METHODS))
    assert not missing, ("Confinement classes not in _build_methods.METHODS (auto never tries them, the option "
                         "refuses their name): %s" % ", ".join(missing))


def test_each_method_names_itself_once_with_a_poll_interval():
    names = [method.name for method in _build_methods.METHODS]
    assert len(names) == len(set(names)) and "auto" not in names
    for method in _build_methods.METHODS:
        assert isinstance(method.name, str) and method.name, method
        assert method.auto_rank is None or isinstance(method.auto_rank, int), method.name


def test_the_documented_choices_are_the_registry():
    documented = yaml.safe_load(guarded_build_options.ModuleDocFragment.DOCUMENTATION)["options"]["confinement"]
    assert tuple(documented["choices"]) == _build_methods.strategy_names(), (
        "plugins/doc_fragments/guarded_build_options.py: confinement choices %s, the registry has %s"
        % (documented["choices"], list(_build_methods.strategy_names())))
    assert tuple(ARGUMENT_SPEC["confinement"]["choices"]) == _build_methods.strategy_names(), (
        "guarded_build's ARGUMENT_SPEC confinement choices differ from the registry")
