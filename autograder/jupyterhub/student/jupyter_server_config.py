"""A student's Jupyter server on the course hub: nbgrader's Assignments tab and Validate, no formgrader."""

c = get_config()  # noqa: F821 - Jupyter's config loader provides it

c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.assignment_list": True,
    "nbgrader.server_extensions.validate_assignment": True,
    "nbgrader.server_extensions.formgrader": False,
    "nbgrader.server_extensions.course_list": False,
    # Not needed on the hub, and each costs a server's start CPU time: the language-server
    # bridge (no language server is installed), Notebook 7's pages (JupyterLab is the interface).
    "jupyter_lsp": False,
    "notebook": False,
    "nbgitpuller": True,    # the book's "launch in JupyterHub" links
    "jupyterlab_jupytext": True,   # the book's MyST Markdown pages open as notebooks
}
# A terminal's shell is not a login shell, which would reset PATH and lose the course's Python.
c.ServerApp.terminado_settings = {"shell_command": ["/bin/bash"]}
