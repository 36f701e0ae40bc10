"""The old name of ``attention_course.tasks.experiments``: the commands recorded in
``book/results/09_applications.json`` run it as ``python -m attention_course.applications.experiments``."""

import sys

from ..tasks.experiments import main

if __name__ == "__main__":
    sys.exit(main())
