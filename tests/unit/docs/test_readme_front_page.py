# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""README.md is a front page, not the manual (issue 39): at most 12 KiB, every guide in docs/ reachable from it, and
every relative link of README.md and the guides names a file that exists (in README.md or docs/, which the docs site
holds) and, with a #fragment, a heading it has
(GitHub's anchors: what the docs site's MyST parser makes too; tests/host/test_docs_site.py checks the built site)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def read(rel):
    with open(os.path.join(REPO, rel), encoding="utf-8") as handle:
        return handle.read()


def guides():
    return sorted("docs/" + name for name in os.listdir(os.path.join(REPO, "docs")) if name.endswith(".md"))


def anchor(heading):
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped (``-`` and ``_`` kept), spaces to -."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text, flags=re.U).replace(" ", "-")


def anchors(rel):
    seen, result = {}, set()
    for line in FENCE.sub("", read(rel)).splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            base = anchor(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else "%s-%d" % (base, count))
    return result


def links(rel):
    """(target file relative to the repo or None for a page-local anchor, fragment) of each relative link."""
    found = []
    for target in LINK.findall(FENCE.sub("", read(rel))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _sep, fragment = target.partition("#")
        found.append((os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel, fragment))
    return found


def test_readme_is_a_front_page_of_at_most_12_kib():
    size = os.path.getsize(os.path.join(REPO, "README.md"))
    assert size <= 12 * 1024, "README.md is %d bytes, more than 12 KiB: move the detail into a guide in docs/" % size


def test_readme_names_the_two_commands():
    text = read("README.md")
    assert "make preflight" in text and "make test" in text   # .ci/run runs `make test`, "the test command README gives"


def test_every_guide_is_reachable_from_the_readme():
    reached, todo = set(), ["README.md"]
    while todo:
        page = todo.pop()
        for target, _fragment in links(page):
            if target.endswith(".md") and target not in reached and os.path.exists(os.path.join(REPO, target)):
                reached.add(target)
                todo.append(target)
    missing = [page for page in guides() if page not in reached]
    assert not missing, "not reachable from README.md by links: %s" % ", ".join(missing)


def test_every_relative_link_resolves():
    broken = []
    for page in ["README.md"] + guides():
        for target, fragment in links(page):
            if not os.path.exists(os.path.join(REPO, target)):
                broken.append("%s -> %s (no such file)" % (page, target))
            elif fragment and target.endswith(".md") and fragment not in anchors(target):
                broken.append("%s -> %s#%s (no such heading)" % (page, target, fragment))
    assert not broken, "\n".join(broken)


def test_links_stay_in_what_the_docs_site_holds():
    # the site (docs/docsite/build-site.sh) holds README.md and docs/ only: a link to another file of the repository
    # works on GitHub but fails the site's build; name such a file as code (`tests/vm/README.md`) instead
    outside = ["%s -> %s" % (page, target) for page in ["README.md"] + guides() for target, _fragment in links(page)
               if target != "README.md" and not target.startswith("docs/")]
    assert not outside, "links to files the docs site does not have:\n%s" % "\n".join(outside)


def test_each_guide_starts_with_what_a_user_does():
    # the first paragraph after the title speaks to the reader ("You run ...") rather than about the code
    for page in ["docs/fleet-preflight.md", "docs/build.md", "docs/integrations.md", "docs/reference.md",
                 "docs/as-root.md", "docs/development.md"]:
        first = read(page).split("\n\n")[1]
        assert first.startswith("You "), "%s: the first paragraph should say what you do: %r" % (page, first[:80])
