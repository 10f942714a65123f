# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The docs site `make docs` builds (docs/docsite/build-site.sh: antsibull-docs + Sphinx, issue 39), built once into a
temporary directory and read as a user reads it: in a real headless Chromium (Debian's package, tests/system-deps.sh).

- the front page, every guide and plugin pages render: a screenshot that is not blank, and the DOM Chromium built
  holds the page's own text (README's two commands, a guide's title, a module's options);
- every link of those rendered pages that stays in the site (relative, file://) opens a file the build wrote, and
  its #fragment names an element of that page;
- every page of the site, read from disk, links only to pages and anchors that exist (the same check over all of
  them, without a browser, which would take a minute more);
- every guide of docs/ and every plugin and role of the collection has its page.
The build itself fails on any Sphinx warning but the offline ones (docs.ansible.com's labels), so a broken MyST link
or a plugin doc that does not render stops it first."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess
import sys
import time
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from conftest import CHROMIUM, chromium, non_white_share  # noqa: E402 pylint: disable=wrong-import-position

HREF = re.compile(r"""<(?:a|link|img|script)\b[^>]*?\b(?:href|src)="([^"]*)\"""", re.I)
ID = re.compile(r"""\bid="([^"]+)\"""")
GUIDES = sorted(name[:-3] for name in os.listdir(os.path.join(REPO, "docs")) if name.endswith(".md"))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The built site's html directory (one build for the module: about 10 s on 2 cores)."""
    dest = tmp_path_factory.mktemp("docs-site")
    started = time.time()
    build = subprocess.run([os.path.join(REPO, "docs", "docsite", "build-site.sh"), str(dest)], cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert build.returncode == 0, build.stdout[-6000:]
    html = os.path.join(str(dest), "build", "html")
    assert os.path.isfile(os.path.join(html, "index.html")), build.stdout[-3000:]
    print("docs site built in %.1f s" % (time.time() - started))
    return html


def local_target(page, link):
    """(file path, fragment) of a link of ``page`` that stays in the site, or None for one that leaves it."""
    url, fragment = urldefrag(urljoin("file://" + page, link))
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    return unquote(parsed.path), unquote(fragment)


def ids(path, cache={}):  # pylint: disable=dangerous-default-value
    if path not in cache:
        with open(path, encoding="utf-8") as handle:
            cache[path] = set(ID.findall(handle.read()))
    return cache[path]


def broken_links(page, text):
    broken = []
    for link in HREF.findall(text.replace("&amp;", "&")):
        if not link or link.startswith(("mailto:", "javascript:", "data:")):
            continue
        target = local_target(page, link)
        if target is None:
            continue
        path, fragment = target
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")
        if not os.path.isfile(path):
            broken.append("%s: %s (no such file)" % (page, link))
        elif fragment and path.endswith(".html") and fragment not in ids(path):
            broken.append("%s: %s (no element with that id)" % (page, link))
    return broken


def all_pages(html):
    for dirpath, _dirs, files in os.walk(html):
        for name in files:
            if name.endswith(".html"):
                yield os.path.join(dirpath, name)


def collection_contents():
    """``[(kind, short name)]`` of every plugin and role the collection has, as ansible-doc lists them."""
    found = []
    for kind in ("module", "filter", "test", "lookup", "role"):
        listing = subprocess.run([os.path.join(REPO, ".venv", "bin", "ansible-doc"), "--list", "--json", "-t", kind,
                                  "gpufleet.preflight"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 universal_newlines=True, check=True)
        found += [(kind, name.rsplit(".", 1)[-1]) for name in json.loads(listing.stdout or "{}")]
    return found


def test_every_guide_plugin_and_role_has_its_page(site):
    missing = ["docs/%s.html" % guide for guide in GUIDES if not os.path.isfile(os.path.join(site, "docs", guide + ".html"))]
    plugins = os.path.join(site, "collections", "gpufleet", "preflight")
    contents = collection_contents()
    assert len([kind for kind, _name in contents if kind == "module"]) >= 10 and ("role", "preflight") in contents, contents
    missing += ["%s_%s.html" % (name, kind) for kind, name in contents
                if not os.path.isfile(os.path.join(plugins, "%s_%s.html" % (name, kind)))]
    assert not missing, "no page for: %s" % ", ".join(missing)


def test_every_link_between_pages_resolves(site):
    broken = []
    for page in all_pages(site):
        with open(page, encoding="utf-8") as handle:
            broken += broken_links(page, handle.read())
    assert not broken, "\n".join(broken[:40])


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (tests/system-deps.sh)")
@pytest.mark.parametrize("page, expected", [
    ("index.html", ("make preflight", "make test", "gpufleet_preflight_ready", "Fleet preflight and the gate")),
    ("docs/fleet-preflight.html", ("Accepting a new fleet", "preflight_drop_mode")),
    ("docs/build.html", ("The compiler cache", "guarded_build")),
    ("docs/integrations.html", ("HealthCheckProgram", "node_exporter")),
    ("docs/reference.html", ("What each check means", "available_memory")),
    ("collections/gpufleet/preflight/index.html", ("guarded_build", "readiness")),
    ("collections/gpufleet/preflight/readiness_module.html", ("min_available_memory", "Parameters")),
    ("collections/gpufleet/preflight/preflight_role.html", ("preflight_min_available_memory",)),
])
def test_a_page_renders_in_chromium_and_its_links_resolve(site, tmp_path, page, expected):
    path = os.path.join(site, page)
    shot = str(tmp_path / "page.png")
    proc = chromium(path, "--screenshot=%s" % shot, "--window-size=1200,1600", "--hide-scrollbars")
    assert os.path.exists(shot), proc.stderr[-3000:]
    share = non_white_share(shot)
    assert share > 0.01, "%s: the screenshot is (nearly) blank: %.4f of its pixels are not white" % (page, share)
    dom = chromium(path, "--dump-dom").stdout
    assert "<title>" in dom and dom.count("<a ") > 10, dom[:2000]
    text = re.sub(r"<[^>]+>", "", dom)
    missing = [word for word in expected if word not in text]
    assert not missing, "%s: the rendered page lacks %s" % (page, missing)
    assert not broken_links(path, dom)
