# Entry points named in README.md. `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV ?= $(CURDIR)/.venv
BIN := $(VENV)/bin
COLLECTIONS := $(CURDIR)/.tmp/collections
COLLECTION := $(COLLECTIONS)/ansible_collections/gpufleet/preflight
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export PATH := $(BIN):$(PATH)

.PHONY: setup preflight test docs system-deps sanity units integration lint build-check host build roles fleet sweep vm bench field-test clean

setup: $(VENV)/.installed $(COLLECTION)

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@ $(VENV)/.installed-run

# `make preflight` needs only what the controller runs (requirements.txt: ansible-core, paramiko, jmespath), not the
# test and lint tools of requirements-dev.txt; a venv `make setup` made has them already.
$(VENV)/.installed-run: requirements.txt
	test -f $(VENV)/.installed -a ! requirements.txt -nt $(VENV)/.installed || { \
	  $(PYTHON) -m venv $(VENV) && $(BIN)/pip install --quiet --upgrade pip && \
	  $(BIN)/pip install --quiet -r requirements.txt; }
	touch $@

$(COLLECTION):
	mkdir -p $(dir $@)
	ln -sfn $(CURDIR) $@

preflight: $(VENV)/.installed-run $(COLLECTION)
	$(BIN)/ansible-playbook playbooks/preflight.yml

test: setup system-deps
	tests/run-all.sh

system-deps:
	tests/system-deps.sh

# The docs site (antsibull-docs + Sphinx: the plugins' and roles' own documentation, README.md and the guides of docs/)
# in .tmp/docs/build/html; docs/development.md, "The docs site".
docs: setup
	docs/docsite/build-site.sh .tmp/docs

sanity units integration lint build-check host build roles fleet sweep: setup
	tests/run-all.sh $@

# The VM stage alone (root, QEMU, debootstrap; images cached in /var/cache/gpufleet-vm): tests/vm/README.md.
vm: setup system-deps
	tests/run-all.sh vm

# The real sgl-kernel tree through the role (not in CI: it needs the sources): SGL_CHECKOUT, SGL_OFFLINE, SGL_VENV as bench/field_test.sh says.
field-test: setup
	bench/field_test.sh

bench: setup system-deps
	bench/run-all.sh

clean:
	rm -rf .tmp tests/output reports
