# The two commands a newcomer needs: `make demo` and `make test`.
# Each creates its own virtualenv and installs what it needs, so a fresh machine works.
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench chromium kernelspec clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

kernelspec: $(STAMP)
	$(PY) -m agent_kernel.install --sys-prefix

# Browser tests drive the system Chromium through Playwright (no browser download).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Chromium for the browser tests (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

test: $(STAMP) kernelspec chromium
	$(PY) -m pytest -q

# The quickstart on the offline model unless AGENT_KERNEL_MODEL names another; JupyterLab prints
# the URL to open (with its token). Everything it runs comes from $(VENV); containers run as root.
demo: $(STAMP) kernelspec
	@echo "Starting JupyterLab on notebooks/01_quickstart.ipynb with the $${AGENT_KERNEL_MODEL:-offline} model."
	@echo "Open the http://127.0.0.1:.../lab/tree/01_quickstart.ipynb URL printed below; Ctrl+C stops the server."
	AGENT_KERNEL_MODEL="$${AGENT_KERNEL_MODEL:-offline}" $(VENV)/bin/jupyter lab --ip=127.0.0.1 --no-browser \
	  --ServerApp.root_dir=notebooks --LabApp.default_url=/lab/tree/01_quickstart.ipynb \
	  $$([ "$$(id -u)" = 0 ] && echo --allow-root)

bench: $(STAMP)
	for f in benchmarks/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
