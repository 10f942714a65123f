#!/usr/bin/env bash
# The tarball ansible-galaxy builds must install into an empty collections path and run the preflight.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ansible-galaxy collection build --force --output-path "$work" .
tarball=$(ls "$work"/gpufleet-preflight-*.tar.gz)
echo "built $(basename "$tarball"): $(tar -tzf "$tarball" | wc -l) files"
if tar -tzf "$tarball" | grep -E '(^|/)(\.venv|\.tmp|reports|tests/output|\.ansible)/' ; then
  echo "build_ignore let the files above into the tarball" >&2; exit 1
fi
# What Galaxy's importer and users need is there; the development checkout is not (galaxy.yml build_ignore says why).
listing=$(tar -tzf "$tarball")
for wanted in LICENSE README.md meta/runtime.yml changelogs/config.yaml tests/sanity/ignore-2.17.txt; do
  grep -qx "$wanted" <<<"$listing" || { echo "the tarball lacks $wanted" >&2; exit 1; }
done
if [ -f changelogs/changelog.yaml ] && ! grep -qx changelogs/changelog.yaml <<<"$listing"; then
  echo "the tarball lacks changelogs/changelog.yaml" >&2; exit 1
fi
if grep -E '^(Makefile|requirements-dev\.txt|ansible\.cfg|inventory/|bench/|changelogs/fragments/|tests/(unit|sweep|fleet|vm|host|build|tools)/)' <<<"$listing"; then
  echo "build_ignore let the development files above into the tarball" >&2; exit 1
fi
# Nothing of the checkout may be in reach from here on: tests/env.sh puts the checkout's collection link on
# PYTHONPATH and ANSIBLE_COLLECTIONS_PATH, and Ansible also scans sys.path for ansible_collections/ - with either, the
# install said "Nothing to do" and the preflight ran the checkout's code, so a broken tarball passed.
unset PYTHONPATH ANSIBLE_CONFIG
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false ANSIBLE_COLLECTIONS_PATH="$work/collections"
mkdir -p "$work/collections"
cd "$work"
ansible-galaxy collection install "$tarball" -p "$work/collections" | tee "$work/install.txt"
grep -q "gpufleet.preflight:.* was installed successfully" "$work/install.txt" \
  || { echo "the tarball was not installed into the empty path" >&2; exit 1; }
installed="$work/collections/ansible_collections/gpufleet/preflight"
if [ ! -d "$installed" ] || [ -L "$installed" ]; then echo "$installed is not the installed copy" >&2; exit 1; fi
cat > inventory.yml <<'INV'
all:
  hosts:
    localhost:
      ansible_connection: local
      ansible_python_interpreter: "{{ ansible_playbook_python }}"
INV
printf '[defaults]\n' > ansible.cfg
# From the installed tarball only: no ansible.cfg of the checkout, no link to it. A policy this machine passes (no
# profile, 1MiB, any build process of a neighbour): a gate with no ready node stops the run (exit 2), and this check
# is about the tarball, not the machine.
# -vvv names the playbook's file and each module file it sends: all of them must be the installed copy's.
ANSIBLE_CONFIG="$work/ansible.cfg" \
  ansible-playbook -vvv -i inventory.yml gpufleet.preflight.preflight \
  -e '{"preflight_profiles": []}' -e preflight_min_available_memory=1MiB -e preflight_max_build_processes=100000 \
  -e preflight_max_memory_pressure=100 -e preflight_report_dir="$work/reports" > "$work/out.txt" 2>&1 \
  || { tail -40 "$work/out.txt" >&2; echo "the preflight failed from the installed tarball" >&2; exit 1; }
grep -q "of 1)" "$work/out.txt"
ran=$(grep -oE "(plays in|Using module file) /[^ ]+" "$work/out.txt" | awk '{print $NF}' | sort -u)
echo "ran from: $ran"
grep -qx "$installed/plugins/modules/node_facts.py" <<<"$ran" \
  || { echo "node_facts did not run from the installed copy" >&2; exit 1; }
if grep -v "^$installed/" <<<"$ran" | grep -E "gpufleet|preflight"; then
  echo "the files above ran from outside the installed copy (the checkout?)" >&2; exit 1
fi
python3 -c "import json,sys; r=json.load(open('$work/reports/preflight.json')); assert r['summary']['total']==1, r['summary']; print('report:', r['summary'])"
