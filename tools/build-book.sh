#!/usr/bin/env bash
# Build the HTML book into _build/html (open _build/html/index.html).
#   1. the offline assets: MathJax, the ipywidgets embed manager and RequireJS, pinned in
#      tools/book-assets/package-lock.json, installed with `npm ci` (only when missing or changed)
#      and copied into book/_assets/vendor/ (git-ignored), served from the book's _static/;
#   2. the student versions of every exercise (the autograder's release: solutions and hidden tests
#      removed, leak-checked) into _build/student/book/exercises/, which Sphinx copies next to the
#      pages (html_extra_path); regenerated only when solutions/ or autograder/ changed; and the
#      course package as a wheel, _build/student/attention_course-<version>-py3-none-any.whl;
#   3. jupyter-book build . (notebooks executed with the cache, emptied when attention_course/ or
#      the experiments' results in book/results/ change; any cell error fails the build).
# Environment: PYTHON (default .venv/bin/python), NPM (default npm).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
PYTHON="${PYTHON:-$root/.venv/bin/python}"
NPM="${NPM:-npm}"
[ -x "$PYTHON" ] || PYTHON="$(command -v python3)"
BIN="$(dirname "$PYTHON")"

# 1. offline assets
assets="$root/tools/book-assets"
vendor="$root/book/_assets/vendor"
lock_hash="$(sha256sum "$assets/package-lock.json" | cut -d' ' -f1)"
if [ ! -f "$assets/node_modules/.lock-hash" ] || [ "$(cat "$assets/node_modules/.lock-hash")" != "$lock_hash" ]; then
    echo "build-book: installing the offline assets (npm ci)"
    command -v "$NPM" >/dev/null || { echo "build-book: npm is needed once, to install the offline assets (Debian: apt-get install npm)" >&2; exit 1; }
    (cd "$assets" && "$NPM" ci --no-audit --no-fund --loglevel=error)
    echo "$lock_hash" > "$assets/node_modules/.lock-hash"
fi
if [ ! -f "$vendor/.lock-hash" ] || [ "$(cat "$vendor/.lock-hash")" != "$lock_hash" ]; then
    echo "build-book: copying the assets into book/_assets/vendor/"
    rm -rf "$vendor"
    mkdir -p "$vendor/mathjax" "$vendor/html-manager" "$vendor/requirejs"
    modules="$assets/node_modules"
    # MathJax: the one combined component the book loads, and the parts it loads lazily
    # (fonts, extensions, menu); not the speech rule engine or the other combined builds.
    cp "$modules/mathjax/es5/tex-chtml-full.js" "$vendor/mathjax/"
    cp -r "$modules/mathjax/es5/input" "$modules/mathjax/es5/output" "$modules/mathjax/es5/ui" \
          "$modules/mathjax/es5/a11y" "$modules/mathjax/es5/adaptors" "$vendor/mathjax/"
    cp "$modules/mathjax/LICENSE" "$vendor/mathjax/"
    find "$modules/@jupyter-widgets/html-manager/dist" -maxdepth 1 -type f ! -name '*.map' \
        -exec cp {} "$vendor/html-manager/" \;
    cp "$modules/@jupyter-widgets/html-manager/LICENSE" "$vendor/html-manager/" 2>/dev/null || true
    cp "$modules/requirejs/require.js" "$vendor/requirejs/"
    echo "$lock_hash" > "$vendor/.lock-hash"
fi

# 2. the student versions of the exercises
student="$root/_build/student"
sources_hash="$(find solutions autograder -type f \( -name '*.ipynb' -o -name '*.py' \) \
    ! -path '*/.ipynb_checkpoints/*' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
if [ ! -f "$root/_build/student.sources-hash" ] || [ "$(cat "$root/_build/student.sources-hash")" != "$sources_hash" ]; then
    echo "build-book: releasing the student versions of the exercises"
    course="$(mktemp -d)"
    trap 'rm -rf "$course"' EXIT
    "$PYTHON" -m autograder --course-dir "$course" release --all >/dev/null
    rm -rf "$student"
    mkdir -p "$student/book/exercises"
    for released in "$course"/release/*/; do
        assignment="$(basename "$released")"
        cp "$released/$assignment.ipynb" "$student/book/exercises/$assignment.ipynb"
    done
    echo "$sources_hash" > "$root/_build/student.sources-hash"
fi

# 2a. the course package as a wheel, served with the book for students who work on their own
# computer (the exercises page links it): built from a copy of the package's sources, so that
# the checkout gets no build/ folder; rebuilt only when the package changed.
wheel_hash="$(find attention_course pyproject.toml -type f ! -path '*/__pycache__/*' -print0 | sort -z \
    | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$root/_build/wheel.sources-hash" 2>/dev/null)" != "$wheel_hash" ] \
        || ! compgen -G "$student/attention_course-*.whl" >/dev/null; then
    echo "build-book: building the course package's wheel"
    wheel_src="$(mktemp -d)"
    cp -r pyproject.toml README.md attention_course "$wheel_src/"
    find "$wheel_src" -name __pycache__ -prune -exec rm -rf {} +
    mkdir -p "$student"
    rm -f "$student"/attention_course-*.whl
    "$PYTHON" -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir "$student" "$wheel_src"
    rm -rf "$wheel_src"
    echo "$wheel_hash" > "$root/_build/wheel.sources-hash"
fi

# 2b. the chapters as .ipynb notebooks (no outputs; code that the pages include from the package
# written out, diagrams drawn), with the experiments' results they load, into
# _build/student/chapters/: what a chapter's launch button opens (attention_course.book), so a hub
# without jupytext opens them too. A file is rewritten only when its content changed.
"$PYTHON" "$root/tools/chapter_notebooks.py" "$root" "$root/_build/student/chapters"

# 3. the book. The execution cache keys on a page's code cells only, so a change to the package the
# pages import, or to the experiments' results they load (book/results/: every file, checkpoints'
# weights included), must empty it, or the book would show the old code's outputs.
all_pages=()
package_hash="$( { find attention_course -type f -name '*.py' ! -path '*/__pycache__/*' -print0; \
    find book/results -type f -print0 2>/dev/null; } | sort -z \
    | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$root/_build/package.hash" 2>/dev/null)" != "$package_hash" ]; then
    echo "build-book: attention_course or book/results changed (or first build): executing every page"
    rm -rf "$root/_build/.jupyter_cache"
    all_pages=(--all)
fi
mkdir -p "$root/_build"
rm -f "$root/_build/build-book.ok" "$root/_build/package.hash"
set +e
"$BIN/jupyter-book" build "$root" --builder html "${all_pages[@]}" 2>&1 | tee "$root/_build/build-book.log"
status=${PIPESTATUS[0]}
set -e
# nb_execution_raise_on_error makes a cell error fail jupyter-book; the grep is a second guard.
if [ "$status" -ne 0 ] || grep -q "Executing notebook failed\|CellExecutionError\|Notebook exception" "$root/_build/build-book.log"; then
    echo "build-book: FAILED (see the messages above, or _build/html/reports/ for cell errors)" >&2
    exit 1
fi
echo "$package_hash" > "$root/_build/package.hash"
touch "$root/_build/build-book.ok"   # the tests reuse a build newer than its sources
echo "build-book: built in ${SECONDS}s; open $root/_build/html/index.html"
