# shellcheck shell=bash
# Sourced by tests/run-all.sh and bench/run-all.sh: the project's venv, its ansible.cfg and the
# collection link, so both run exactly what `make setup` made. Expects to be sourced from the repo root.
REPO=$PWD
VENV=${VENV:-$REPO/.venv}
export PATH="$VENV/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$REPO/.tmp/collections"
export ANSIBLE_CONFIG="$REPO/ansible.cfg"
export PYTHONPATH="$REPO/.tmp/collections${PYTHONPATH:+:$PYTHONPATH}"
