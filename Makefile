# A few commands do everything on a fresh machine (see README.md):
#   make book    set up, then build the HTML book (open _build/html/index.html)
#   make test    set up, then run the test suite (it builds the book too, and opens it in Chromium)
#   make train   set up, then train the attention model on dates and draw its alignments
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch, pinned: a loose `torch` in a fresh environment pulls a multi-GB CUDA build.
TORCH_CPU := torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: setup train test bench book clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile tools/hub-assets/package-lock.json
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_CPU)" -e ".[dev,torch,grading,book,hub,lti]"
	{ command -v bwrap && command -v setpriv && command -v prlimit && command -v chromium && command -v dot && command -v git && command -v useradd && command -v npm && command -v mkfs.ext4 && command -v openssl; } >/dev/null || bash tools/install-system-packages.sh
	cd tools/hub-assets && npm ci --silent --no-audit --no-fund   # configurable-http-proxy, for the course hub
	touch $(STAMP)

train: $(STAMP)
	$(BIN)/attention-course train --track numpy --out runs/dates

test: $(STAMP)
	$(BIN)/python -m pytest -q

# The book: offline assets from npm (pinned in tools/book-assets/), the student versions of the
# exercises, then jupyter-book (notebooks executed with a cache; any cell error fails the build).
book: $(STAMP)
	PYTHON=$(BIN)/python bash tools/build-book.sh

bench: $(STAMP)
	$(BIN)/python benchmarks/time_attention.py
	$(BIN)/python benchmarks/dates_time_to_accuracy.py

clean:
	rm -rf $(VENV) runs .pytest_cache .hypothesis _build book/_assets/vendor tools/book-assets/node_modules tools/hub-assets/node_modules
