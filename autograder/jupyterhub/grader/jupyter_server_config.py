"""A course's grader service on the course hub: the formgrader, for the course's instructors only.

Grading itself is ``python -m autograder autograde``: sandboxed, never nbgrader's own autograde.
"""

c = get_config()  # noqa: F821 - Jupyter's config loader provides it

c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.formgrader": True,
    "nbgrader.server_extensions.validate_assignment": True,
    "nbgrader.server_extensions.assignment_list": False,
    "nbgrader.server_extensions.course_list": False,
}
