# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CUDA compile steps of a CMake-generated ``build.ninja``, read as text (pure; ``_sgl_tree.read_ninja_summary``
reads the file):

* ``arch_number(arch)``: one spelling of a GPU architecture (``sm_120a``, ``12.0``) -> ``120``.
* ``parse_ninja_cuda_steps(text)``: each CUDA compile step with the architectures it compiles for (``-gencode``,
  ``--generate-code``, ``-arch=sm_XX``).
* ``summarize_cuda_steps(steps, keep)``: steps per target, architectures, and the steps that still compile for an
  architecture not in ``keep`` (what the SM120 filter must have removed).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# -gencode=arch=compute_90a,code=sm_90a | -gencode arch=... | --generate-code=arch=compute_120,code=[compute_120,sm_120]
_GENCODE = re.compile(r"(?:-gencode|--generate-code)[= ]arch=compute_(\d+[a-z]?),code=(\[[^\]]*\]|[a-z]+_\d+[a-z]?)")
_ARCH = re.compile(r"(?:-arch|--gpu-architecture)[= ](?:sm|compute)_(\d+[a-z]?)")
_CODE_ARCH = re.compile(r"(?:sm|compute|lto)_(\d+[a-z]?)")


def arch_number(arch):
    """``sm_120a``, ``compute_120a``, ``120a``, ``12.0`` -> ``120``; None when it is not an architecture."""
    text = str(arch).strip().lower()
    match = re.match(r"^(\d+)\.(\d)[af]?$", text)
    if match:
        return match.group(1) + match.group(2)
    match = re.match(r"^(?:sm_|compute_|lto_)?(\d+)[af]?(?:-real|-virtual)?$", text)
    return match.group(1) if match else None


def _flag_archs(flags):
    archs = set()
    for virtual, code in _GENCODE.findall(flags):
        archs.add(virtual)
        archs.update(_CODE_ARCH.findall(code))
    archs.update(_ARCH.findall(flags))
    return archs


def _ninja_logical_lines(text):
    """Join ninja's ``$``-newline continuations."""
    return re.sub(r"\$\n[ \t]*", "", text).split("\n")


def _ninja_unescape(path):
    return re.sub(r"\$([ :$])", r"\1", path)


def parse_ninja_cuda_steps(text):
    """The CUDA compile steps of a CMake-generated build.ninja.

    -> [{"output", "source", "target", "archs": sorted list}] where ``archs`` holds every architecture the
    step's FLAGS name (virtual and real, e.g. ``["120a"]`` or ``["80", "90", "90a"]``).
    """
    steps = []
    current = None
    for line in _ninja_logical_lines(text):
        if line.startswith("build "):
            current = None
            head = line[len("build "):]
            match = re.match(r"((?:[^:$]|\$.)+):\s+(\S+)\s*(.*)$", head)
            if not match or not match.group(2).startswith("CUDA_COMPILER__"):
                continue
            inputs = re.split(r"(?<!\$)\s+", match.group(3).split("||")[0].split(" | ")[0].strip())
            rule_target = re.sub(r"^CUDA_COMPILER__", "", match.group(2))
            current = {"output": _ninja_unescape(match.group(1).strip()),
                       "source": _ninja_unescape(inputs[0]) if inputs and inputs[0] else None,
                       "target": None, "rule_target": rule_target, "flags": ""}
            steps.append(current)
        elif current is not None and line.startswith("  "):
            key, _sep, value = line.strip().partition(" = ")
            if key == "FLAGS":
                current["flags"] = value
            elif key == "OBJECT_DIR":
                found = re.search(r"CMakeFiles/([^/]+)\.dir$", value.strip())
                if found:
                    current["target"] = found.group(1)
        elif not line.strip():
            continue
        else:
            current = None
    result = []
    for step in steps:
        target = step["target"] or re.sub(r"_(unscanned_)?[A-Za-z]*$", "", step["rule_target"])
        result.append({"output": step["output"], "source": step["source"], "target": target,
                       "archs": sorted(_flag_archs(step["flags"]), key=_arch_sort_key)})
    return result


def _arch_sort_key(arch):
    number = arch_number(arch) or "0"
    return (int(number), arch)


def summarize_cuda_steps(steps, keep=None):
    """Counts for people and for the refusal.

    ``keep``: architecture numbers wanted (``["120"]``); None keeps everything.
    -> {"cuda_steps", "archs", "targets": {target: {"steps", "archs"}}, "other_arch_steps",
        "other_archs", "other_examples" (up to 5 outputs)}
    """
    keep_numbers = None if keep is None else set(arch_number(arch) for arch in keep)
    archs = set()
    targets = {}
    others = []
    other_archs = set()
    for step in steps:
        archs.update(step["archs"])
        entry = targets.setdefault(step["target"], {"steps": 0, "archs": set()})
        entry["steps"] += 1
        entry["archs"].update(step["archs"])
        if keep_numbers is not None:
            unwanted = [arch for arch in step["archs"] if arch_number(arch) not in keep_numbers]
            if unwanted:
                others.append(step["output"])
                other_archs.update(unwanted)
    return {
        "cuda_steps": len(steps),
        "archs": sorted(archs, key=_arch_sort_key),
        "targets": dict((name, {"steps": value["steps"], "archs": sorted(value["archs"], key=_arch_sort_key)})
                        for name, value in sorted(targets.items())),
        "other_arch_steps": len(others),
        "other_archs": sorted(other_archs, key=_arch_sort_key),
        "other_examples": others[:5],
    }
