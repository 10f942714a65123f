# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a tree needs of a node (issue 35 items 6 and 7): the census - measured peaks shipped for known trees, used
where nothing was learned or seeded -, the sources too big for the memory one compile may have alone, the smallest
memory limit that builds them, and the fastest fixed ``-j`` that cannot OOM for a build without admission. Stdlib
only, no I/O: the role copies this file beside the launcher (plugins/module_utils/_build/_admission.py).

A census file (JSON): ``{"format": "gpufleet-admission-census/1", "tree": "<name>@<version>/<archs>", "nvcc": ...,
"measured": "<where and how>", "sources": {"<path in the tree>": {"peak_bytes": N, "seconds": S, "threads": T}}}`` -
entries as peaks.json's, keyed by the path the launcher keys a source by (relative to the project root; a
FetchContent offline source ``offline/<folder>/<path>``, ``_admission_policy.source_key``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

try:    # in the collection
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_policy as policy
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _admission_threads as threads_rule
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build._admission_settings import ALONE_RESERVE
except ImportError:     # beside the build: the launcher's folder is on sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _admission_policy as policy  # pylint: disable=import-error
    import _admission_threads as threads_rule  # pylint: disable=import-error
    from _admission_settings import ALONE_RESERVE  # pylint: disable=import-error

FORMAT = "gpufleet-admission-census/1"


def census_peaks(census, tree):
    """A census file (docs/build.md, "The census") as peaks entries keyed ``census:<path>`` when it was measured for
    ``tree`` (the same name, version and archs; a tree key may add ``@<commit>``), else {}: a census of another
    version or arch says nothing of this one. Bad entries are dropped as a peaks file's are."""
    if not isinstance(census, dict) or census.get("format") != FORMAT or not isinstance(census.get("sources"), dict):
        return {}
    measured = census.get("tree")
    if not isinstance(measured, str) or not tree or not (tree == measured or tree.startswith(measured + "@")):
        return {}
    return dict((policy.CENSUS + path, dict(entry, census=measured)) for path, entry in census["sources"].items()
                if isinstance(path, str) and policy.valid_peak(entry))


def census_of(peaks, tree, measured):
    """A census of ``tree`` from what a node learned (its peaks.json, seeds included, or the fleet's merge): per path
    the finished entry with the largest peak - a source built with several flag sets needs the most of them - with
    its time, threads and phases. Killed and stopped compiles are left out (a census says what a compile needs, learned
    where it finished), as are census entries (a census is never made of another)."""
    sources = {}
    for key, entry in policy.merge_peaks(peaks).items():
        if not key.startswith(tree + ":") or entry.get("killed") or entry.get("stopped"):
            continue
        path, kept = policy.path_of(key), sources.get(policy.path_of(key))
        if kept is None or entry["peak_bytes"] > kept["peak_bytes"]:
            sources[path] = dict((name, entry[name]) for name in ("peak_bytes", "seconds", "threads", "phases")
                                 if entry.get(name) is not None)
    return {"format": FORMAT, "tree": tree, "measured": measured, "sources": dict(sorted(sources.items()))}


def of_tree(peaks, tree):
    """The merged entries of ``tree``'s sources: learned here or seeded, and the census's for the paths nothing
    learned (one entry per source)."""
    prefix = tree + ":" if tree else ""
    merged = policy.merge_peaks(peaks)
    own = dict((k, e) for k, e in merged.items() if k.startswith(prefix) and not k.startswith(policy.CENSUS))
    paths = set(policy.path_of(k) for k in own)
    own.update((k, e) for k, e in merged.items() if k.startswith(policy.CENSUS) and policy.path_of(k) not in paths)
    return own


def kin(tree):
    """``(name, archs)`` of a tree key ``<name>@<version>/<archs>[@<commit>]``; None for anything else."""
    if not isinstance(tree, str) or "@" not in tree or "/" not in tree:
        return None
    name, rest = tree.split("@", 1)
    archs = rest.split("/", 1)[1].split("@", 1)[0]
    return (name, archs) if name and archs else None


def similar_seconds(peaks, documents, tree):
    """``{path: seconds}`` from the trees of the same name and archs at another version or commit - this node's
    learned and seeded entries of those trees, then the census files of other versions (``documents``) - for the
    cold build's ETA where ``tree`` itself is unknown: most sources of sgl-kernel carry over from one release or commit
    to the next, and their times with them, where a first minute of quick C++ steps says nothing of the hours of CUDA
    to come (the real tree's cold ETA read 1,357 s at 5 minutes of about 4,000). A path's time is the median of the
    trees that know it. Never used for admission: another version's peaks are not this one's."""
    family = kin(tree)
    if family is None:
        return {}
    times = {}
    for key, entry in policy.merge_peaks(peaks).items():
        other = key.split(":", 1)[0]
        if not key.startswith(policy.CENSUS) and other != tree and kin(other) == family:
            times.setdefault(policy.path_of(key), []).append(float(entry.get("seconds") or 0))
    for document in documents:
        if isinstance(document, dict) and document.get("format") == FORMAT and document.get("tree") != tree \
                and kin(document.get("tree")) == family and not census_peaks(document, tree):
            for key, entry in census_peaks(document, document["tree"]).items():
                times.setdefault(policy.path_of(key), []).append(float(entry.get("seconds") or 0))
    found = {}
    for path, seconds in times.items():
        seconds = sorted(value for value in seconds if value > 0)
        if seconds:
            found[path] = seconds[len(seconds) // 2]
    return found


def safe_fixed_jobs(peaks, budget_bytes, cpus, tree=None):
    """For a build without admission: the largest fixed ``-j`` (MAX_JOBS, at one nvcc thread) that cannot OOM - any j
    compiles of the tree may run together, so the j largest peaks must fit the budget - at most the CPUs; 0 when
    even the largest alone does not fit; None when nothing of the tree is known."""
    sizes = sorted((int(e["peak_bytes"]) for e in of_tree(peaks, tree).values() if not e.get("killed")), reverse=True)
    if not sizes:
        return None
    jobs, total = 0, 0
    for size in sizes[:max(int(cpus), 1)]:
        if total + size > budget_bytes:
            break
        jobs, total = jobs + 1, total + size
    return jobs


def too_big(peaks, budget_bytes, tree=None, margin=1.0):
    """``[(key, peak_bytes, killed)]`` of the sources (of ``tree``) that need more than the budget even alone: a
    learned one whose peak - at the fewest nvcc threads measured: the scheduler may run a multi-arch compile with
    fewer than last time - is over it, and one OOM-killed holding a peak that times the margin is over it (it was
    killed at that size, so it needs more: the field rerun's fp8_blockwise_gemm_kernel.cu, killed again and again)."""
    found = []
    for key, entry in of_tree(peaks, tree).items():
        if entry.get("stopped"):
            continue
        least = min(list(threads_rule.thread_points(entry).values()) or [int(entry["peak_bytes"])])
        if least * (margin if entry.get("killed") else 1) > budget_bytes:
            found.append((key, int(least), policy.oom_killed(entry)))
    return sorted(found)


def too_big_message(big, budget_bytes, smallest_limit=None):
    """What a person reads for ``too_big``'s answer ('' for none): each source and its need, and the smallest memory
    limit that builds them (``smallest_limit``)."""
    if not big:
        return ""

    def said(key, peak, killed):
        if key.startswith(policy.CENSUS):
            return "%s (%.1f GiB in the shipped census)" % (policy.path_of(key), peak / 1024.0 ** 3)
        return ("%s (more than %.1f GiB: OOM-killed holding that)" if killed else "%s (%.1f GiB, held when compiled)") % (
            key, peak / 1024.0 ** 3)
    return "the budget of %.1f GiB is below what these sources need alone: %s%s" % (budget_bytes / 1024.0 ** 3, ", ".join(
        said(key, peak, killed) for key, peak, killed in big),
        "; the smallest memory limit that builds them: %.1f GiB" % (smallest_limit / 1024.0 ** 3) if smallest_limit else "")


def smallest_limit(big, margin):
    """The smallest memory limit that builds the sources ``too_big`` named: the largest need plus what ninja and CMake
    hold beside it (an OOM-killed one: what it held x the margin, it needs more)."""
    return max([int(peak * (margin if killed else 1)) + ALONE_RESERVE for _key, peak, killed in big] or [0]) or None


def refusal(peaks, ceiling_bytes, tree, margin):
    """``(too_big's answer, the smallest limit, the message)`` for a build of ``tree`` whose compile alone may hold
    ``ceiling_bytes``."""
    big = too_big(peaks, ceiling_bytes, tree, margin)
    smallest = smallest_limit(big, margin)
    return big, smallest, too_big_message(big, ceiling_bytes, smallest)
