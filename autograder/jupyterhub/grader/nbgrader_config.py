"""nbgrader in a course's grader service on the course hub.

The course itself (its id, directory, gradebook and exchange) is in the nbgrader_config.py of
the course directory, this server's working directory, written by ``python -m autograder``.
"""

c = get_config()  # noqa: F821 - Jupyter's config loader provides it

c.Exchange.path_includes_course = True
