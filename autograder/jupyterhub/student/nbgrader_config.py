"""nbgrader in a student's server on the course hub: the exchange, and the courses from the hub's groups.

A submission is private: nbgrader's own submit leaves the submission's folder writable by everyone
(0777, "hidden by the timestamp" in its name) and its files readable by everyone. Here it is made
in a folder only the student can enter, its modes set (folders rwxr-s---, files rw-r-----: the
student, and the group of the exchange's inbound folder, which is the course's grader account's
own), and only then renamed into the inbound folder, whose sticky bit lets no one else rename or
remove it.
"""

import os
import tempfile

from nbgrader.auth import JupyterHubAuthPlugin
from nbgrader.exchange.default.submit import ExchangeSubmit

c = get_config()  # noqa: F821 - Jupyter's config loader provides it


class PrivateSubmit(ExchangeSubmit):
    def copy_files(self):
        inbound = self.inbound_path
        staging = tempfile.mkdtemp(prefix=".submitting-", dir=inbound)   # 0700, the student's
        try:
            self.inbound_path = staging
            super().copy_files()
        finally:
            self.inbound_path = inbound
        made = os.path.join(staging, self.assignment_filename)
        for folder, _, files in os.walk(made):
            os.chmod(folder, 0o2750)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o640)
        os.rename(made, os.path.join(inbound, self.assignment_filename))
        os.rmdir(staging)


c.Exchange.root = os.environ["NBGRADER_EXCHANGE_ROOT"]
c.Exchange.path_includes_course = True
c.ExchangeFactory.submit = PrivateSubmit
# The courses a user sees are those of their hub groups nbgrader-<course> / formgrade-<course>.
c.Authenticator.plugin_class = JupyterHubAuthPlugin
