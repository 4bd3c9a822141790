# Two commands for a new machine: `make run` (the embedded dev service) and `make test`.
# Both do all set-up themselves and are safe to run again.

VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NPM_STAMP := node_modules/.installed
PG_URL ?= postgresql://postgres@127.0.0.1:5432/test

.PHONY: run test lint setup bytecode browser-deps bench compile clean openapi sdk docs fuzz messages woo

setup: $(STAMP) $(NPM_STAMP)

$(STAMP): pyproject.toml constraints.txt clients/python/pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# The Python SDK too (its own package; the tests and examples/shop use it).
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]' -e clients/python
	touch $(STAMP)

$(NPM_STAMP): package.json package-lock.json
	@# `npm ci` installs exactly the locked versions and never writes the lock file (it keeps
	@# every platform's optional anvil binary and installs only this machine's).
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NPM_STAMP)

# Our own modules' bytecode, written ahead (only what changed): where PYTHONDONTWRITEBYTECODE
# is set, every process would otherwise compile them again as it starts, and the tests start
# hundreds of `invoicing` processes.
bytecode: setup
	$(PY) -m compileall -q src clients/python/src > /dev/null

# Options go to `invoicing dev` through ARGS: `make run ARGS="--port 8200 --chain-port 8600"`
# (`.venv/bin/invoicing dev --help` lists them).
run: setup bytecode
	$(VENV)/bin/invoicing dev $(ARGS)

# Debian's Chromium for the browser tests, installed when this machine allows it (root or
# password-less sudo); otherwise one line says why and those tests skip.
browser-deps:
	@bash scripts/install-browser-deps.sh --if-possible
	@bash scripts/install-php.sh --if-possible

# The WooCommerce plugin's zip, as WordPress installs it: integrations/woocommerce/build/.
woo:
	python3 integrations/woocommerce/build.py

# The whole suite on SQLite; `make test DB=postgres` runs it on PostgreSQL ($(PG_URL)).
# `TEST_WORKERS=4` runs it on 4 pytest-xdist workers (the tests mostly wait on anvil and on
# subprocesses, so more workers than cores pay off); 3 is the default; 0 runs it in one process.
# Each test file, and each group of files that share an expensive process, runs on one worker
# (tests/support/workers.py). `PYTEST_ARGS="tests/unit -q"` runs a part; `-m "not slow"`
# leaves out the tests that take seconds (CI runs them all).
TEST_WORKERS ?= 3
test: setup bytecode browser-deps
ifeq ($(DB),postgres)
	INVOICING_TEST_DATABASE=$(PG_URL) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=10 $(PYTEST_ARGS)
else
	INVOICING_TEST_DATABASE=sqlite $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=10 $(PYTEST_ARGS)
endif

lint: setup
	$(VENV)/bin/ruff check src tests bench clients/python clients/sdkgen examples
	$(VENV)/bin/ruff format --check src tests bench clients/python clients/sdkgen examples
	$(VENV)/bin/mypy

# The payment page's messages: extract them (babel.cfg) into the template and add new ones,
# empty, to every language's catalogue (tests/unit/test_page_catalogues.py fails until each
# is translated). The catalogues are read as .po files at run time: nothing to compile.
LOCALES := src/invoicing/web/page/locales
messages: setup
	$(VENV)/bin/pybabel extract -F babel.cfg --no-location --sort-output --omit-header -k _ -o $(LOCALES)/messages.pot .
	$(VENV)/bin/pybabel update -i $(LOCALES)/messages.pot -d $(LOCALES) --no-fuzzy-matching --ignore-obsolete -w 100

# The docs site (docs/, mkdocs.yml) into site/; --strict fails on any broken link or anchor.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

compile: $(NPM_STAMP)
	node scripts/compile.mjs

# forge's fuzz and invariant tests of the contracts (tests/fuzz, settings in foundry.toml);
# offline, compiled by the pinned npm solc through scripts/solc. The platform binary runs, not
# the node wrapper node_modules/.bin/forge: the wrapper (@foundry-rs/forge 1.7.1) exits 0 even
# when a test fails, which would let this step, and CI's, pass on a failing test.
fuzz: $(NPM_STAMP)
	@forge=$$(ls node_modules/@foundry-rs/forge-*/bin/forge 2>/dev/null | head -n 1); \
	test -x "$$forge" || { echo "forge not found under node_modules/@foundry-rs/: run npm ci" >&2; exit 1; }; \
	echo "$$forge test"; "$$forge" test

bench: setup
	$(PY) bench/gas.py

clean:
	rm -rf $(VENV) node_modules

openapi: setup
	$(PY) -m invoicing.web.openapi > openapi.json

# Both SDKs' models and routes from openapi.json (run `make openapi` first when a route
# changed): clients/python/src/invoicing_client/_generated/ and clients/js/src/generated/.
# tests/unit/test_sdk_generated.py fails when the committed files differ.
sdk: setup
	$(PY) -m clients.sdkgen
