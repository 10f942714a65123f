# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Versions and GPU architectures compared as numbers (pure, stdlib): ``_toolchain`` reports them, the readiness
checks judge them, both through these functions."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

VERSION_RE = re.compile(r"([0-9]+(?:\.[0-9]+)+)")

# The written forms an option must have, one rule each: the readiness policy, guarded_build's options and the roles
# (test gpufleet.preflight.valid_form) all match these.
FORMS = {
    "version": re.compile(r"[0-9]+(\.[0-9]+){0,3}\Z"),                    # 3.18, 570.86.15
    "gpu_arch": re.compile(r"(sm|compute)_[0-9]+[af]?\Z"),                 # sm_120a, compute_120
    "compute_capability": re.compile(r"[0-9]+\.[0-9]+\Z"),                 # 12.0
    # TORCH_CUDA_ARCH_LIST: 12.0a, "9.0 12.0+PTX", 9.0;12.0a
    "cuda_arch_list": re.compile(r"[0-9]+\.[0-9]+[af]?(\+PTX)?([; ][0-9]+\.[0-9]+[af]?(\+PTX)?)*\Z"),
}


def has_form(form, value):
    """Whether ``value`` (text) is written in ``form`` (a key of FORMS); anything not text is not."""
    return isinstance(value, str) and bool(FORMS[form].match(value))


def version_tuple(text):
    """``'3.31.6'`` -> ``(3, 31, 6)``; None for None or text without a version."""
    if text is None:
        return None
    match = VERSION_RE.search(str(text))
    if not match:
        return None
    return tuple(int(part) for part in match.group(1).split("."))


def version_at_least(version, minimum):
    """``version >= minimum`` comparing numerically (``'3.9' < '3.10'``); None when either is unknown."""
    have, want = version_tuple(version), version_tuple(minimum)
    if have is None or want is None:
        return None
    length = max(len(have), len(want))
    return have + (0,) * (length - len(have)) >= want + (0,) * (length - len(want))


def split_arch(arch):
    """``'sm_120a'`` -> ``('sm', 120, 'a')``; ``'120'``/``'12.0'`` -> ``(None, 120, '')``; ValueError otherwise."""
    text = str(arch).strip().lower()
    if re.match(r"^[0-9]+\.[0-9]$", text):
        major, minor = text.split(".")
        return None, int(major) * 10 + int(minor), ""
    match = re.match(r"^(?:(sm|compute|lto)_)?([0-9]+)([af]?)$", text)
    if not match:
        raise ValueError("%r is not a GPU architecture like sm_120a, compute_120, 120 or 12.0" % (arch,))
    return match.group(1), int(match.group(2)), match.group(3)


def supports(nvcc, arch):
    """Whether the nvcc described by ``nvcc`` (its facts) can target ``arch``: ``(bool, reason)``.

    ``sm_120a``/``compute_120a`` (architecture-specific) need the base ``120`` in nvcc's lists and CC >= 9.0;
    ``sm_100f`` (family) needs CUDA >= 12.9. CUDA 12.6 lists no 120 at all; 12.8 and later do.
    """
    kind, number, suffix = split_arch(arch)
    if not nvcc or not nvcc.get("present"):
        return False, "nvcc not found"
    codes = nvcc.get("gpu_codes") or []
    archs = nvcc.get("gpu_archs") or []
    if kind == "sm":
        known = codes
    elif kind == "compute":
        known = archs
    else:
        known = codes + archs
    numbers = set(split_arch(item)[1] for item in known)
    cuda = nvcc.get("cuda_version")
    if not known:
        return False, "nvcc %s listed no GPU architectures" % (cuda or "?")
    if number not in numbers:
        return False, "nvcc %s does not know %s (it knows %s to %s)" % (cuda or "?", arch, min(numbers), max(numbers))
    if suffix == "a" and number < 90:
        return False, "architecture-specific targets (the 'a' suffix) start at sm_90a"
    if suffix == "f" and not version_at_least(cuda, "12.9"):
        return False, "family targets (the 'f' suffix) need CUDA >= 12.9, nvcc is %s" % (cuda or "?")
    return True, "nvcc %s supports %s" % (cuda or "?", arch)
