"""Helpers for the book's pages: the exercise links at the end of each chapter, the results of
the longer experiments (``load_results``), and the book's Sphinx hooks (``setup``).

``exercise_links("ch3a_multi_query_penalty", ...)`` returns a Markdown block with, for each assignment,
its title, a link to download the *student* version (generated into the built book by
``tools/build-book.sh``, next to the pages in ``exercises/``), a link to the exercises page's
instructions for working on one's own computer, and a launch link for JupyterHub through
nbgitpuller, plus Binder and Colab links, when ``_config.yml`` configures them (with no hub
configured, the default, there is no launch link at all: never one to a placeholder host).
``local_setup_markdown()`` is those instructions: the course package's wheel, served with the
book, and the one command that installs it.

Settings, all in ``_config.yml`` at the repository root:

- ``launch_buttons.jupyterhub_url``: the hub's address (the one setting an instructor changes);
  empty means no JupyterHub link. ``launch_buttons.binderhub_url`` and ``launch_buttons.colab_url``
  do the same for Binder and Colab (those need a GitHub repository).
- ``sphinx.config.html_context.course_exercises``: where the student notebooks live in git for
  nbgitpuller: ``repository`` (default ``repository.url``), ``branch``, ``path`` (a pattern
  with ``{assignment}``) and ``chapter_path`` (a pattern with ``{page}``: the chapters as
  ``.ipynb`` notebooks, which ``tools/build-book.sh`` writes into ``_build/student/chapters/``).

A chapter page's own "launch" buttons (Jupyter Book's, which would open the MyST ``.md`` source,
a notebook only where jupytext is installed) are pointed at that ``.ipynb`` by the Sphinx hook
below, so they open on a stock JupyterHub with nbgitpuller.

Only the notebooks' JSON is read (for the title); the solutions' code is never imported.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode, urlparse

REPO_ROOT = Path(__file__).resolve().parents[1]
DOWNLOAD_FOLDER = "exercises"  # relative to the built pages (book/*.html)
LOCAL_SETUP_ANCHOR = "exercises.html#on-your-own-computer"  # the exercises page's instructions


@dataclass(frozen=True)
class LaunchSettings:
    jupyterhub_url: str = ""
    binderhub_url: str = ""
    colab_url: str = ""
    repository: str = ""
    branch: str = "main"
    path: str = "exercises/{assignment}.ipynb"
    chapter_path: str = "chapters/{page}.ipynb"


def _find_root(start: Path | None = None) -> Path:
    """The folder with ``_config.yml``: the package's checkout, else the nearest parent of ``start``."""
    if (REPO_ROOT / "_config.yml").is_file():
        return REPO_ROOT
    start = (start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / "_config.yml").is_file():
            return folder
    raise FileNotFoundError(f"no _config.yml in {REPO_ROOT} or above {start}")


def launch_settings(root: Path | None = None) -> LaunchSettings:
    """Read the launch settings from ``_config.yml``."""
    import yaml  # jupyter-book's dependency; only needed here

    root = root or _find_root()
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8")) or {}
    buttons = config.get("launch_buttons") or {}
    repository = config.get("repository") or {}
    html_context = ((config.get("sphinx") or {}).get("config") or {}).get("html_context") or {}
    exercises = html_context.get("course_exercises") or {}
    return LaunchSettings(
        jupyterhub_url=(buttons.get("jupyterhub_url") or "").rstrip("/"),
        binderhub_url=(buttons.get("binderhub_url") or "").rstrip("/"),
        colab_url=(buttons.get("colab_url") or "").rstrip("/"),
        repository=(exercises.get("repository") or repository.get("url") or "").rstrip("/"),
        branch=exercises.get("branch") or repository.get("branch") or "main",
        path=exercises.get("path") or LaunchSettings.path,
        chapter_path=exercises.get("chapter_path") or LaunchSettings.chapter_path,
    )


def notebook_title(notebook: Path) -> str:
    """The text of the first markdown heading in ``notebook`` (its file name if there is none)."""
    cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    for cell in cells:
        if cell.get("cell_type") != "markdown":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        for line in source.splitlines():
            if line.lstrip().startswith("#"):
                return line.lstrip().lstrip("#").strip()
    return notebook.stem


def solution_notebook(assignment: str, root: Path | None = None) -> Path:
    """The single source notebook ``solutions/<assignment>/<assignment>.ipynb`` (or the first one)."""
    folder = (root or _find_root()) / "solutions" / assignment
    preferred = folder / f"{assignment}.ipynb"
    if preferred.is_file():
        return preferred
    notebooks = sorted(folder.glob("*.ipynb"))
    if not notebooks:
        raise FileNotFoundError(f"no assignment {assignment!r}: no notebook in {folder}")
    return notebooks[0]


def _github_slug(repository: str) -> str | None:
    parsed = urlparse(repository)
    if parsed.netloc != "github.com":
        return None
    return parsed.path.strip("/").removesuffix(".git")


def nbgitpuller_url(settings: LaunchSettings, path: str) -> str:
    """A JupyterHub link that clones/updates the repository for the user and opens ``path`` in Lab."""
    folder = urlparse(settings.repository).path.rstrip("/").split("/")[-1].removesuffix(".git")
    # targetpath: nbgitpuller's own default keeps a ".git" suffix, which the urlpath would then miss
    query = urlencode({"repo": settings.repository, "branch": settings.branch, "targetpath": folder,
                       "urlpath": f"lab/tree/{folder}/{path}"})
    return f"{settings.jupyterhub_url}/hub/user-redirect/git-pull?{query}"


def launch_links(assignment: str, settings: LaunchSettings) -> list[tuple[str, str]]:
    """(label, url) pairs for the configured launchers."""
    return launch_links_to(settings.path.format(assignment=assignment), settings)


def chapter_launch_links(page: str, settings: LaunchSettings) -> list[tuple[str, str]]:
    """(label, url) pairs that open the chapter ``page`` (e.g. ``01_bottleneck``) as a notebook."""
    return launch_links_to(settings.chapter_path.format(page=page), settings)


def launch_links_to(path: str, settings: LaunchSettings) -> list[tuple[str, str]]:
    """(label, url) pairs for the configured launchers, opening ``path`` in the repository."""
    links = []
    if settings.jupyterhub_url and settings.repository:
        links.append(("launch in JupyterHub", nbgitpuller_url(settings, path)))
    slug = _github_slug(settings.repository)
    if settings.binderhub_url and slug:
        links.append(("launch in Binder", f"{settings.binderhub_url}/v2/gh/{slug}/{quote(settings.branch)}"
                                          f"?urlpath={quote('lab/tree/' + path)}"))
    if settings.colab_url and slug:
        links.append(("open in Colab", f"{settings.colab_url}/github/{slug}/blob/{quote(settings.branch)}/{path}"))
    return links


def exercise_links_markdown(*assignments: str, root: Path | None = None) -> str:
    """The Markdown text behind :func:`exercise_links`."""
    root = root or _find_root()
    settings = launch_settings(root)
    lines = []
    for assignment in assignments:
        title = html.escape(notebook_title(solution_notebook(assignment, root)))
        parts = [f'<a href="{DOWNLOAD_FOLDER}/{assignment}.ipynb" download>download the notebook</a>',
                 f'<a href="{LOCAL_SETUP_ANCHOR}">how to open it on your computer</a>']
        parts += [f'<a href="{html.escape(url)}">{label}</a>' for label, url in launch_links(assignment, settings)]
        lines.append(f"- **{title}** (`{assignment}`): " + " · ".join(parts))
    return "\n".join(lines) + "\n"


def package_version(root: Path | None = None) -> str:
    """The course package's version, from ``pyproject.toml`` (the wheel the book serves is built from it)."""
    import re

    text = ((root or _find_root()) / "pyproject.toml").read_text(encoding="utf-8")
    project = text.split("[project]", 1)[-1].split("\n[", 1)[0]  # the [project] table only
    found = re.search(r'^version\s*=\s*"([^"]+)"', project, re.MULTILINE)
    if found is None:
        raise ValueError("pyproject.toml: no version in [project]")
    return found.group(1)


def wheel_name(root: Path | None = None) -> str:
    """The file name of the wheel that ``tools/build-book.sh`` serves at the book's root."""
    return f"attention_course-{package_version(root)}-py3-none-any.whl"


def local_setup_markdown(root: Path | None = None) -> str:
    """How to work on an exercise on one's own computer: the wheel, one command, then Jupyter."""
    wheel = wheel_name(root)
    return (
        f'1. Download the notebook (the *download the notebook* link of the exercise) and the course '
        f'package, <a href="../{wheel}" download>{wheel}</a>, into one folder.\n'
        f'2. Set up, once, with Python 3.10 or newer (the `[torch]` part installs PyTorch, which the '
        f'`b` exercises need; it is a large download):\n\n'
        f'   ```bash\n   python3 -m pip install "./{wheel}[torch]" jupyterlab\n   ```\n\n'
        f'3. Open the notebook: `python3 -m jupyter lab ch3a_multi_query_penalty.ipynb` (with your '
        f"notebook's name), and run its cells from the top.\n"
    )


def load_results(name: str) -> dict:
    """The results an experiment of ``tools/experiments/`` committed, ``book/results/<name>.json``.

    Looked for in ``results/`` beside the running notebook first (a page runs in ``book/``), then
    in the checkout the package comes from.
    """
    for folder in (Path.cwd() / "results", REPO_ROOT / "book" / "results"):
        path = folder / f"{name}.json"
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    raise FileNotFoundError(f"no results {name!r}: book/results/{name}.json is missing; "
                            f"run the command in tools/experiments/ that writes it")


def over_seeds(records: list[dict], value: str, **where) -> tuple:
    """Mean and standard deviation over seeds of ``record[value]`` (a number or a list of numbers,
    ``None`` for a missing one) in the records whose fields equal ``where``; and the seeds.

    Returns ``(mean, sd, seeds)``: floats, or arrays for lists (NaN where a value is missing).
    """
    import numpy as np

    chosen = [record for record in records if all(record.get(key) == wanted for key, wanted in where.items())]
    if not chosen:
        raise ValueError(f"over_seeds: no record with {where}")
    values = np.array([[np.nan if v is None else v for v in np.atleast_1d(np.asarray(record[value], dtype=object))]
                       for record in chosen], dtype=float)  # (seeds, ...)
    sd = values.std(axis=0, ddof=1) if len(values) > 1 else np.zeros(values.shape[1:])
    mean = values.mean(axis=0)
    seeds = sorted(record.get("seed") for record in chosen)
    if np.ndim(chosen[0][value]) == 0:
        return float(mean[0]), float(sd[0]), seeds
    return mean, sd, seeds


def cpu_timings(functions: dict, repeats: int = 9) -> dict:
    """``repeats`` timings of each of ``functions`` (name -> callable with no arguments), in
    seconds of this process's CPU time: name -> list of floats, in the order taken.

    The functions take turns, one call each per round, after one warm-up call each: a stretch
    of load from other programs (a virtual machine's CPU time counts the time its processor
    was lent elsewhere) then slows all of them alike, so their ratios, which a page compares,
    hold better than those of timings taken one function after the other.
    """
    import time

    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"cpu_timings: repeats must be a whole number of at least 1, not {repeats!r}")
    for fn in functions.values():
        fn()
    times = {name: [] for name in functions}
    for _ in range(repeats):
        for name, fn in functions.items():
            start = time.process_time()
            fn()
            times[name].append(time.process_time() - start)
    return times


def cpu_seconds(functions: dict, repeats: int = 9) -> dict:
    """The best (least) of ``cpu_timings(functions, repeats)`` of each function: name -> seconds."""
    return {name: min(times) for name, times in cpu_timings(functions, repeats).items()}


def exercise_links(*assignments: str):
    """Markdown with a title, a student-version download link and launch links per assignment."""
    from IPython.display import Markdown

    if not assignments:
        raise ValueError("exercise_links needs at least one assignment name, e.g. 'ch3a_multi_query_penalty'")
    return Markdown(exercise_links_markdown(*assignments))


# --- the Sphinx extension (``_config.yml``: ``sphinx.extra_extensions``) ---------------------


def _script_key(script) -> tuple:
    """What makes two of a page's scripts the same script: the file, or the inline body."""
    attributes = getattr(script, "attributes", {}) or {}
    return (getattr(script, "filename", str(script)) or None,  # inline: None or ""
            tuple(sorted((key, str(value)) for key, value in attributes.items() if key != "priority")))


def _one_copy_of_each_script(app, pagename, templatename, context, doctree) -> None:
    """sphinx-thebe 0.3 adds its inline configuration script twice under Sphinx 7.4 (once
    with the file name ``None``, once with ``""``); the second copy re-declares a ``const``
    and the browser logs a SyntaxError on every page."""
    scripts = context.get("script_files")
    if scripts:
        seen, unique = set(), []
        for script in scripts:
            key = _script_key(script)
            if key not in seen:
                seen.add(key)
                unique.append(script)
        scripts[:] = unique


# The theme's launch buttons, by their text, and the label of ours that replaces each url.
_THEME_LAUNCHERS = {"JupyterHub": "launch in JupyterHub", "Binder": "launch in Binder",
                    "Colab": "open in Colab"}


def _launch_groups(header_buttons) -> list[list[dict]]:
    """The lists of buttons in the theme's header that hold a launcher."""
    groups = []
    for entry in header_buttons or []:
        buttons = entry.get("buttons") if isinstance(entry, dict) else None
        if isinstance(buttons, list) and any(isinstance(b, dict) and b.get("text")
                                             in _THEME_LAUNCHERS for b in buttons):
            groups.append(buttons)
    return groups


def _chapter_launch_buttons(app, pagename, templatename, context, doctree) -> None:
    """Point a page's launch buttons at the page's ``.ipynb`` (``chapter_path``), not its
    ``.md`` source; drop a launcher our settings cannot give (no dead link)."""
    groups = _launch_groups(context.get("header_buttons"))
    if not groups:
        return
    folders = [Path(folder) for folder in (getattr(app, "srcdir", None),
                                           getattr(app, "confdir", None)) if folder]
    root = next((folder for folder in folders if (folder / "_config.yml").is_file()), None)
    settings = launch_settings(root)
    ours = dict(chapter_launch_links(Path(pagename).name, settings))
    for buttons in groups:
        kept = []
        for button in buttons:
            label = _THEME_LAUNCHERS.get(button.get("text"))
            if label is None:
                kept.append(button)
            elif ours.get(label):
                kept.append({**button, "url": ours[label]})
        buttons[:] = kept


class DiagramError(ValueError):
    """A diagram of the book that cannot be drawn accessibly (a ``{graphviz}`` block without ``:alt:``)."""


def diagram_html(source: str, alt: str, classes: str = "graphviz") -> str:
    """The HTML of one drawn diagram: an ``img`` with its text alternative (which screen readers
    read, unlike the fallback text of the ``object`` that Sphinx writes, ignored once the SVG has
    loaded), inside a link to the SVG itself, so that a reader on a small screen can open the
    diagram at full size and zoom."""
    source, alt = html.escape(source, quote=True), html.escape(" ".join(alt.split()), quote=True)
    return (f'<div class="graphviz"><a class="diagram-zoom" href="{source}" '
            f'title="open the diagram at full size">'
            f'<img src="{source}" alt="{alt}" class="{html.escape(classes, quote=True)}" /></a></div>\n')


def _html_visit_graphviz(self, node) -> None:
    """Sphinx's Graphviz node as :func:`diagram_html` (SVG), or a build error if it has no ``:alt:``."""
    from docutils import nodes
    from sphinx.ext.graphviz import GraphvizError, render_dot

    alt = " ".join(str(node.get("alt") or "").split())
    if not alt:
        where = f"{node.source or self.builder.current_docname}, line {node.line}"
        raise DiagramError(f"{where}: a {{graphviz}} diagram needs an :alt: text that says what it shows")
    try:
        source, _ = render_dot(self, node["code"], node["options"], "svg", "graphviz", node.get("filename"))
    except GraphvizError as error:
        raise DiagramError(f"{node.source}, line {node.line}: dot failed: {error}") from None
    classes = " ".join(["graphviz", *node.get("classes", [])])
    self.body.append(diagram_html(source, alt, classes))
    raise nodes.SkipNode


def setup(app):
    """Sphinx hooks of the book (listed in ``_config.yml``, ``sphinx.extra_extensions``)."""
    from sphinx.ext.graphviz import graphviz

    # After sphinx.ext.graphviz (listed before this extension): draw every diagram as an image
    # with a text alternative.
    app.add_node(graphviz, override=True, html=(_html_visit_graphviz, None))
    # First in line: Sphinx stops calling html-page-context handlers at the first that
    # returns a template name.
    app.connect("html-page-context", _one_copy_of_each_script, priority=1)
    # After the theme's handler (priority 500), which makes the launch buttons.
    app.connect("html-page-context", _chapter_launch_buttons, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
