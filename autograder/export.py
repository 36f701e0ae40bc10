"""``export``: the grade table (CSV) and a histogram of scores per assignment (PNG)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from nbgrader.api import MissingEntry

from .course import Course, atomic_write
from .errors import GradingError
from .records import load_report, open_gradebook

COLUMNS = ["assignment", "student", "score", "max_score", "percent", "status", "needs_manual_grade", "flags"]


def grade_rows(course: Course) -> list[dict]:
    """One row per (assignment, student); a student without a submission is ``missing`` with 0."""
    if not course.db_path.exists():
        raise GradingError(f"nothing to export: no gradebook at {course.db_path}")
    rows = []
    with open_gradebook(course) as gb:
        assignments = sorted(gb.assignments, key=lambda a: a.name)
        students = sorted(s.id for s in gb.students)
        if not assignments:
            raise GradingError("nothing to export: the gradebook has no assignments")
        for assignment in assignments:
            report = load_report(course, assignment.name)["students"]
            for student in students:
                entry = report.get(student, {})
                try:
                    submission = gb.find_submission(assignment.name, student)
                except MissingEntry:
                    score, max_score, status, manual = 0.0, float(assignment.max_score), "missing", False
                else:
                    score, max_score = float(submission.score), float(submission.max_score)
                    status, manual = entry.get("status", "not graded"), bool(submission.needs_manual_grade)
                rows.append({
                    "assignment": assignment.name, "student": student, "score": round(score, 4),
                    "max_score": round(max_score, 4),
                    "percent": round(100.0 * score / max_score, 2) if max_score else 0.0,
                    "status": status, "needs_manual_grade": manual,
                    "flags": " | ".join(entry.get("flags", [])) if status != "missing" else "",
                })
    return rows


def write_csv(rows: list[dict], path: Path) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(path, buffer.getvalue())


def write_histogram(rows: list[dict], path: Path) -> None:
    """One panel per assignment: how many submissions scored in each 10% band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    if path.suffix.lower() != ".png":
        raise GradingError(f"histogram must be a .png file: {path}")
    assignments = sorted({row["assignment"] for row in rows})
    columns = min(3, len(assignments))
    lines = math.ceil(len(assignments) / columns)
    figure, axes = plt.subplots(lines, columns, figsize=(4.2 * columns, 3.2 * lines), squeeze=False)
    for ax, assignment in zip(axes.flat, assignments):
        percents = [row["percent"] for row in rows if row["assignment"] == assignment and row["status"] != "missing"]
        ax.hist(percents, bins=[10 * i for i in range(11)], range=(0, 100), color="#4477aa", edgecolor="white")
        ax.set_title(f"{assignment} (n={len(percents)})", fontsize=10)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        if not percents:
            ax.text(50, 0.5, "no submissions", ha="center", va="center", transform=ax.get_xaxis_transform())
        ax.set_xlim(0, 100)
        ax.set_xlabel("score (%)")
        ax.set_ylabel("submissions")
    for ax in list(axes.flat)[len(assignments):]:
        ax.axis("off")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    figure.savefig(tmp, dpi=100)
    plt.close(figure)
    tmp.replace(path)


def export(course: Course, csv_path: Path | None, histogram_path: Path | None) -> list[str]:
    if csv_path is None and histogram_path is None:
        csv_path = course.root / "grades.csv"
    if histogram_path is not None and histogram_path.suffix.lower() != ".png":
        raise GradingError(f"histogram must be a .png file: {histogram_path}")
    rows = grade_rows(course)
    messages = []
    if csv_path is not None:
        write_csv(rows, csv_path)
        messages.append(f"grade table: {len(rows)} row(s) -> {csv_path}")
    if histogram_path is not None:
        write_histogram(rows, histogram_path)
        messages.append(f"histogram: {len({r['assignment'] for r in rows})} assignment(s) -> {histogram_path}")
    return messages
