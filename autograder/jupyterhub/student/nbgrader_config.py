"""nbgrader in a student's server on the course hub: the exchange, and the courses from the hub's groups."""

import os

from nbgrader.auth import JupyterHubAuthPlugin

c = get_config()  # noqa: F821 - Jupyter's config loader provides it

c.Exchange.root = os.environ["NBGRADER_EXCHANGE_ROOT"]
c.Exchange.path_includes_course = True
# The courses a user sees are those of their hub groups nbgrader-<course> / formgrade-<course>.
c.Authenticator.plugin_class = JupyterHubAuthPlugin
