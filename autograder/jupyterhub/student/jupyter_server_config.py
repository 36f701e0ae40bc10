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

# Kernels listen on unix sockets in the server's private /tmp (JUPYTER_RUNTIME_DIR, set by the hub),
# not on TCP ports of 127.0.0.1: no other user can connect to them, and a class starting at once
# cannot race for ports (a port the server picked for a kernel, taken by another's kernel before
# this one bound it, left that kernel unreachable).
c.KernelManager.transport = "ipc"

# A Python kernel of the users' environment is forked from the user's kernel zygote when the server
# has one (a server forked by the hub's fork server, which imported jupyterhub/kernels.py), else
# started as usual.
import sys  # noqa: E402

_kernels = sys.modules.get("autograder.jupyterhub.kernels")
if _kernels is not None and _kernels.ZYGOTE is not None:
    from importlib.metadata import EntryPoint

    from jupyter_client.provisioning.factory import KernelProvisionerFactory

    KernelProvisionerFactory.provisioners["attention-fork"] = EntryPoint(
        "attention-fork", "autograder.jupyterhub.kernels:ForkProvisioner", KernelProvisionerFactory.GROUP_NAME)
    c.KernelProvisionerFactory.default_provisioner_name = "attention-fork"

# /attention/open: where a launch from the LMS lands (landing.py, beside this file, loaded by path:
# the students' environment does not hold the autograder).
import importlib.util  # noqa: E402
import os  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "attention_landing", os.path.join(os.path.dirname(os.path.abspath(__file__)), "landing.py"))
sys.modules["attention_landing"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sys.modules["attention_landing"])
c.ServerApp.jpserver_extensions["attention_landing"] = True
