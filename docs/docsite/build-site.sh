#!/usr/bin/env bash
# `make docs`: the collection's docs site, as the Ansible community builds one (antsibull-docs + Sphinx): the plugins'
# and roles' own documentation (DOCUMENTATION, EXAMPLES, RETURN, meta/argument_specs.yml) rendered by antsibull-docs,
# and README.md with the Markdown guides of docs/ rendered by Sphinx's MyST parser, in one site.
# Usage: docs/docsite/build-site.sh [DEST]   (default .tmp/docs; the pages are DEST/build/html/index.html)
# Expects the venv and the collection link `make setup` makes (tests/env.sh). Offline: no intersphinx.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/env.sh
. tests/env.sh
dest=$(mkdir -p "${1:-.tmp/docs}" && cd "${1:-.tmp/docs}" && pwd)
src=$dest/rst
rm -rf "$src" "$dest/build"
mkdir -p "$src"
chmod 0755 "$dest" "$src"  # antsibull-docs writes only into a directory that only its owner can write
antsibull-docs collection --use-current --fail-on-error --cleanup everything --no-add-antsibull-docs-version \
    --dest-dir "$src" gpufleet.preflight
# README.md is the front page (index.md); docs/*.md keep their names and places, so the links between them work the
# same on GitHub and in the site. The navigation (hidden toctrees) is added to the front page's copy only.
mkdir -p "$src/docs"
cp docs/*.md "$src/docs/"
cp -r docs/images "$src/docs/images"
sed -i 's#](\.\./README\.md#](../index.md#g' "$src"/docs/*.md
# the guides in README's order, then any other docs/*.md
order="fleet-preflight build integrations reference as-root development scale benchmarks architecture security"
guides=()
for name in $order; do
    if [ -f "docs/$name.md" ]; then guides+=("docs/$name"); fi
done
for file in docs/*.md; do
    name=$(basename "$file" .md)
    case " $order " in *" $name "*) ;; *) guides+=("docs/$name") ;; esac
done
cp README.md "$src/index.md"
fence='```'
{
    printf '\n%s{toctree}\n:hidden:\n:caption: Guides\n\n' "$fence"
    printf '%s\n' "${guides[@]}"
    printf '%s\n\n%s{toctree}\n:hidden:\n:caption: Plugins and roles\n\n' "$fence" "$fence"
    printf 'collections/gpufleet/preflight/index\n%s\n' "$fence"
} >> "$src/index.md"
cat > "$dest/conf.py" <<'PY'
project = 'gpufleet.preflight'
copyright = 'gpufleet.preflight contributors'
title = html_short_title = 'gpufleet.preflight'
extensions = ['myst_parser', 'sphinx_antsibull_ext']
myst_heading_anchors = 4
pygments_style = 'ansible'
highlight_language = 'none'  # Markdown fences without a language are text; the plugin pages name theirs
# The plugin pages refer to docs.ansible.com's labels (common_return_values, ansible.builtin's modules) through
# intersphinx; this build is offline, so those render as text. Every other warning fails the build.
suppress_warnings = ['ref.ref']
html_theme = 'sphinx_ansible_theme'
html_show_sphinx = False
html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False
nitpicky = True


def _home_link(app, pagename, templatename, context, doctree):
    # the theme's "documentation home" link is one fixed URL (docs.ansible.com's "/"): here, this site's front page
    context['theme_documentation_home_url'] = context['pathto'](app.config.root_doc)


def setup(app):
    app.connect('html-page-context', _home_link)
PY
sphinx-build -M html "$src" "$dest/build" -c "$dest" -q -W --keep-going -j auto
echo "docs site: $dest/build/html/index.html"
