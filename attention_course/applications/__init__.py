"""The old name of chapter 9's tasks, which now live in ``attention_course.tasks`` with the others.

Kept so that code written against it still runs (``from attention_course.applications import
classify``), and the commands recorded in ``book/results/09_applications.json``
(``python -m attention_course.applications.experiments``). New code imports ``attention_course.tasks``.
"""

from ..tasks import caption, classify, common, experiments, question_answering

__all__ = ["caption", "classify", "common", "experiments", "question_answering"]
