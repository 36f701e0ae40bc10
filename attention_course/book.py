"""Helpers for the book's pages: the exercise links at the end of each chapter.

``exercise_links("ch3a_weight_sum", ...)`` returns a Markdown block with, for each assignment,
its title, a link to download the *student* version (generated into the built book by
``tools/build-book.sh``, next to the pages in ``exercises/``) and a launch link for JupyterHub
through nbgitpuller, plus Binder and Colab links when ``_config.yml`` configures them.

Settings, all in ``_config.yml`` at the repository root:

- ``launch_buttons.jupyterhub_url``: the hub's address (the one setting an instructor changes);
  empty means no JupyterHub link. ``launch_buttons.binderhub_url`` and ``launch_buttons.colab_url``
  do the same for Binder and Colab (those need a GitHub repository).
- ``sphinx.config.html_context.course_exercises``: where the student notebooks live in git for
  nbgitpuller: ``repository`` (default ``repository.url``), ``branch`` and ``path`` (a pattern
  with ``{assignment}``).

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


@dataclass(frozen=True)
class LaunchSettings:
    jupyterhub_url: str = ""
    binderhub_url: str = ""
    colab_url: str = ""
    repository: str = ""
    branch: str = "main"
    path: str = "exercises/{assignment}.ipynb"


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
    path = settings.path.format(assignment=assignment)
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
        parts = [f'<a href="{DOWNLOAD_FOLDER}/{assignment}.ipynb" download>download the notebook</a>']
        parts += [f'<a href="{html.escape(url)}">{label}</a>' for label, url in launch_links(assignment, settings)]
        lines.append(f"- **{title}** (`{assignment}`): " + " · ".join(parts))
    return "\n".join(lines) + "\n"


def exercise_links(*assignments: str):
    """Markdown with a title, a student-version download link and launch links per assignment."""
    from IPython.display import Markdown

    if not assignments:
        raise ValueError("exercise_links needs at least one assignment name, e.g. 'ch3a_weight_sum'")
    return Markdown(exercise_links_markdown(*assignments))
