"""A course's grader service on the course hub: the formgrader, for the course's instructors only.

Grading itself is ``python -m autograder autograde``: sandboxed, never nbgrader's own autograde.
The formgrader guard (``autograder/jupyterhub/formgrader_guard.py``) sanitizes the submissions it
shows, serves them under a strict Content-Security-Policy, and routes its buttons to the
course's own commands.
"""

c = get_config()  # noqa: F821 - Jupyter's config loader provides it

c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.formgrader": True,
    "autograder.jupyterhub.formgrader_guard": True,
    "nbgrader.server_extensions.validate_assignment": True,
    "nbgrader.server_extensions.assignment_list": False,
    "nbgrader.server_extensions.course_list": False,
    # Not needed on the hub, and each costs a server's start CPU time: the language-server
    # bridge (no language server is installed), Notebook 7's pages (JupyterLab is the interface).
    "jupyter_lsp": False,
    "notebook": False,
}
c.HTMLExporter.sanitize_html = True
# A terminal's shell is not a login shell, which would reset PATH and lose the course's Python.
c.ServerApp.terminado_settings = {"shell_command": ["/bin/bash"]}
