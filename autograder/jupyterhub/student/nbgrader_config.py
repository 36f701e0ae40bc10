"""nbgrader in a student's server on the course hub: the exchange, and the courses from the hub's groups.

A submission is private: nbgrader's own submit leaves the submission's folder writable by everyone
(0777, "hidden by the timestamp" in its name) and its files readable by everyone. Here it is made
in a folder only the student can enter, its modes set (folders rwxr-x---, files rw-r-----: the
student, and the group of the exchange's inbound folder, which is the course's grader account's
own and which every file takes from that folder's setgid bit), and only then renamed into the
inbound folder, whose sticky bit lets no one else rename or remove it.
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
        group = os.stat(staging).st_gid   # the inbound folder's (setgid): the course grader's group
        for folder, _, files in os.walk(made):
            os.chmod(folder, 0o750)
            for name in files:
                path = os.path.join(folder, name)
                if os.stat(path).st_gid != group:
                    # written after nbgrader copied the folder's mode (which drops its setgid bit):
                    # made again in the staging folder, which gives the grader's group, and moved back
                    with open(path, "rb") as handle:
                        data = handle.read()
                    fresh = os.path.join(staging, ".regrouped")
                    with open(fresh, "wb") as handle:
                        handle.write(data)
                    os.replace(fresh, path)
                os.chmod(path, 0o640)
        os.rename(made, os.path.join(inbound, self.assignment_filename))
        os.rmdir(staging)


c.Exchange.root = os.environ["NBGRADER_EXCHANGE_ROOT"]
c.Exchange.path_includes_course = True
c.ExchangeFactory.submit = PrivateSubmit
# The courses a user sees are those of their hub groups nbgrader-<course> / formgrade-<course>.
c.Authenticator.plugin_class = JupyterHubAuthPlugin
