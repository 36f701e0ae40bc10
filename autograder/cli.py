"""``python -m autograder <command>``: the instructor's one entry point.

    release   [ASSIGNMENT | --all]             student versions into grading/release/
    publish   ASSIGNMENT                       the student version into nbgrader's exchange
    import    ASSIGNMENT (--from-exchange DIR | --from PATH)
    collect   ASSIGNMENT                       import from the course's exchange
    autograde ASSIGNMENT [--student ID ...] [--workers N] [--unsafe-no-sandbox]
              [--cell-timeout S] [--notebook-timeout S] [--memory-mb M] [--max-processes P] [--bwrap PATH]
    feedback  ASSIGNMENT [--student ID ...]    HTML without hidden tests, into grading/feedback/
    return-feedback ASSIGNMENT [--student ID ...]   the feedback into the exchange, for students to fetch
    export    [--csv FILE] [--histogram FILE.png]
    leakscan  PATH ... [--assignment A ...]    solution or hidden-test lines in any files (exit 1 if found)
    sandbox   [ASSIGNMENT]                     what the grading sandbox offers: every attention_course module
                                               it can import (for ASSIGNMENT: what its read-only cells import)
    hub start ROSTER [--dir D] [--port P] [--create-users] [--ssl-cert C --ssl-key K]   a course hub, as root
    hub update ROSTER [--dir D]                people added or removed while the hub runs
    hub stop  [--dir D] [--remove-users]       never deletes course data
    hub backup DIR [--dir D] | hub restore DIR [--dir D]
    lms push ASSIGNMENT [--dry-run] [--roster R]   the scores of record to the LMS's line item (LTI AGS)
    lms members [--roster R]                   the LMS's class list against the roster's (LTI NRPS)

Global options (before the command): ``--course-dir DIR`` (default: grading/ at the repository
root, outside git), ``--source DIR`` (default: solutions/), ``--course-id ID`` and ``--exchange DIR``
(nbgrader's exchange root, for publish, collect and return-feedback). On a course hub the grader
account's environment sets all four (AUTOGRADER_COURSE_DIR, ..._SOURCE, ..._COURSE_ID, ..._EXCHANGE).

Every error is one line on stderr and exit status 2. ``import`` exits 1 when it refused an entry
(the good ones are imported, each refused one is named), ``feedback`` when it had to withhold a
page, ``leakscan`` when it finds a leak, ``lms push`` when the LMS refused a score or the network lost one.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

from .course import COURSE_ID, DEFAULT_COURSE_DIR, DEFAULT_EXCHANGE, DEFAULT_SOURCE_DIR, Course
from .errors import GradingError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        sys.stderr.write(f"{self.prog}: {message}\n")
        raise SystemExit(2)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m autograder", description="Release, import, autograde (sandboxed, in "
                     "parallel), feedback and export for the course's nbgrader assignments.")
    parser.add_argument("--course-dir", type=Path, default=DEFAULT_COURSE_DIR,
                        help="course directory with the gradebook and submissions (default: %(default)s)")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE_DIR,
                        help="nbgrader source notebooks, <source>/<assignment>/*.ipynb (default: %(default)s)")
    parser.add_argument("--course-id", default=COURSE_ID, help="the course's id (default: %(default)s)")
    parser.add_argument("--exchange", default=DEFAULT_EXCHANGE,
                        help="nbgrader's exchange root, for publish, collect and return-feedback")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    release = commands.add_parser("release", help="generate the student versions")
    release.add_argument("assignment", nargs="?")
    release.add_argument("--all", action="store_true", help="every assignment in the source folder")

    publish = commands.add_parser("publish", help="release the student version into nbgrader's exchange")
    publish.add_argument("assignment")

    collect = commands.add_parser("collect", help="import the latest submissions from the course's exchange")
    collect.add_argument("assignment")

    intake = commands.add_parser("import", help="import submissions")
    intake.add_argument("assignment")
    where = intake.add_mutually_exclusive_group(required=True)
    where.add_argument("--from-exchange", type=Path, metavar="DIR", help="an nbgrader exchange")
    where.add_argument("--from", dest="source_path", type=Path, metavar="PATH",
                       help="a folder or .zip of <student>.ipynb or <student>/<notebook>.ipynb")

    grade = commands.add_parser("autograde", help="grade submissions in sandboxed parallel kernels")
    grade.add_argument("assignment")
    grade.add_argument("--student", action="append", help="grade only this student (repeatable)")
    grade.add_argument("--workers", type=_positive, default=os.cpu_count() or 1,
                       help="at most this many notebooks graded at once (default: the number of CPUs, "
                            "%(default)s); workers after the first start when the batch's work pays for "
                            "their start-up")
    grade.add_argument("--unsafe-no-sandbox", action="store_true",
                       help="run student code without bubblewrap, as you (only where bwrap is unavailable)")
    grade.add_argument("--cell-timeout", type=_positive, default=60, metavar="S", help="seconds per cell (default: 60)")
    grade.add_argument("--notebook-timeout", type=_positive, default=600, metavar="S",
                       help="seconds per notebook (default: 600)")
    grade.add_argument("--memory-mb", type=_positive, default=4096, help="address space per process (default: 4096)")
    grade.add_argument("--max-processes", type=_positive, default=256,
                       help="processes and threads per sandbox (default: 256)")
    grade.add_argument("--bwrap", help="the bubblewrap executable (default: $AUTOGRADER_BWRAP, else bwrap on PATH)")

    feedback = commands.add_parser("feedback", help="HTML feedback without hidden tests")
    feedback.add_argument("assignment")
    feedback.add_argument("--student", action="append", help="only this student (repeatable)")

    returning = commands.add_parser("return-feedback", help="put the feedback into the exchange for students")
    returning.add_argument("assignment")
    returning.add_argument("--student", action="append", help="only this student (repeatable)")

    export = commands.add_parser("export", help="grade table and histogram")
    export.add_argument("--csv", type=Path, metavar="FILE", help="grade table (default: <course-dir>/grades.csv)")
    export.add_argument("--histogram", type=Path, metavar="FILE.png", help="score histogram per assignment")

    hub = commands.add_parser("hub", help="start or stop a course hub (JupyterHub) on this machine")
    hub_commands = hub.add_subparsers(dest="hub_command", required=True, parser_class=_Parser)
    hub_start = hub_commands.add_parser("start", help="set up and start the hub for a roster (as root)")
    hub_start.add_argument("roster", type=Path, help="YAML or JSON: courses, each with instructors and students")
    hub_start.add_argument("--dir", type=Path, default=None, help="the hub's folder (default: /srv/attention-hub)")
    hub_start.add_argument("--ip", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    hub_start.add_argument("--port", type=int, default=8000, help="port to listen on (default: %(default)s)")
    hub_start.add_argument("--authenticator", choices=("pam", "dummy"), default="pam",
                           help="pam: the users' own passwords (default); dummy: one shared password, for tests")
    hub_start.add_argument("--password-file", type=Path, help="the shared password of --authenticator dummy")
    hub_start.add_argument("--create-users", action="store_true", help="make the roster's missing Unix users")
    hub_start.add_argument("--source", dest="hub_source", type=Path, default=None,
                           help="the source notebooks, readable by root only (default: solutions/)")
    hub_start.add_argument("--ssl-cert", type=Path, help="the hub's TLS certificate (PEM): serve HTTPS")
    hub_start.add_argument("--ssl-key", type=Path, help="its private key (PEM, readable by root only)")
    hub_start.add_argument("--insecure-http", action="store_true",
                           help="serve plain HTTP beyond the loopback (only behind a TLS proxy)")
    hub_update = hub_commands.add_parser("update", help="apply a changed roster to the running hub (people, limits, "
                                         "due dates), stopping no one else's server")
    hub_update.add_argument("roster", type=Path)
    hub_update.add_argument("--dir", type=Path, default=None, help="the hub's folder (default: /srv/attention-hub)")
    hub_update.add_argument("--create-users", action="store_true", help="make the roster's missing Unix users")
    hub_stop = hub_commands.add_parser("stop", help="stop the hub, its proxy, services and user servers "
                                       "(course data is never deleted)")
    hub_stop.add_argument("--dir", type=Path, default=None, help="the hub's folder (default: /srv/attention-hub)")
    hub_stop.add_argument("--remove-users", action="store_true",
                          help="remove the accounts `start --create-users` made (their files stay)")
    hub_backup = hub_commands.add_parser("backup", help="copy the course directories, exchange and homes into DIR")
    hub_backup.add_argument("target", type=Path, metavar="DIR", help="a new folder for the backup")
    hub_backup.add_argument("--dir", type=Path, default=None, help="the hub's folder (default: /srv/attention-hub)")
    hub_restore = hub_commands.add_parser("restore", help="put a backup back into a stopped hub's folder "
                                          "(what it replaces is moved aside, not deleted)")
    hub_restore.add_argument("source_dir", type=Path, metavar="DIR", help="a folder made by `hub backup`")
    hub_restore.add_argument("--dir", type=Path, default=None, help="the hub's folder (default: /srv/attention-hub)")

    lms = commands.add_parser("lms", help="grades back to the LMS and its class list (LTI 1.3 Advantage)",
                              description="The course's LMS, as the roster's lti block registers it and the "
                              "course's lti_context names it.")
    lms_commands = lms.add_subparsers(dest="lms_command", required=True, parser_class=_Parser)
    lms_push = lms_commands.add_parser("push", help="publish the assignment's scores of record (the instructor's "
                                       "batch) to its line item in the LMS; only what differs is sent")
    lms_push.add_argument("assignment")
    lms_push.add_argument("--dry-run", action="store_true", help="print what would change; send nothing")
    lms_members = lms_commands.add_parser("members", help="who is in the LMS course but not in the roster, and "
                                          "the other way round")
    for sub in (lms_push, lms_members):
        sub.add_argument("--roster", type=Path, default=None,
                         help="the roster with the lti block (default: $AUTOGRADER_ROSTER)")

    box = commands.add_parser("sandbox", help="list what the grading sandbox can import of the course package")
    box.add_argument("assignment", nargs="?", help="an assignment in the source folder (default: none: the minimum)")
    box.add_argument("--bwrap", help="the bubblewrap executable (default: $AUTOGRADER_BWRAP, else bwrap on PATH)")

    leaks = commands.add_parser("leakscan", help="find solution or hidden-test lines in files (a built book, a wheel)")
    leaks.add_argument("paths", nargs="+", type=Path)
    leaks.add_argument("--assignment", action="append", help="only these assignments' secrets (repeatable)")
    leaks.add_argument("--hidden-only", action="store_true", help="look for hidden tests only (feedback pages)")
    return parser


def run_hub(args: argparse.Namespace) -> int:
    from . import hub

    folder = args.dir or hub.DEFAULT_DIR
    if args.hub_command == "start":
        password = None
        if args.password_file is not None:
            try:
                password = args.password_file.read_text().strip()
            except OSError as exc:
                raise GradingError(f"cannot read --password-file {args.password_file}: {exc.strerror}") from None
        state = hub.start(args.roster, folder, port=args.port, ip=args.ip, authenticator=args.authenticator,
                          password=password, create_users=args.create_users, ssl_cert=args.ssl_cert,
                          ssl_key=args.ssl_key, insecure_http=args.insecure_http,
                          **({"source": args.hub_source} if args.hub_source else {}))
        print(f"the course hub is up at {state['url']}/ (courses: {', '.join(state['courses'])}; "
              f"logs in {folder}/logs)")
        if state.get("lti"):
            print("people sign in from the LMS (LTI 1.3); register the tool there with:")
            print("\n".join(f"  {line}" for line in hub.lti_setup(state)))
            if hub.lms_pages(state):
                print("instructors push grades to the LMS (Preview, Push to the LMS) at:")
                print("\n".join(f"  {line}" for line in hub.lms_pages(state)))
        return 0
    if args.hub_command == "update":
        lines = hub.update(args.roster, folder, create_users=args.create_users)
    elif args.hub_command == "backup":
        lines = [hub.backup(folder, args.target)]
    elif args.hub_command == "restore":
        lines = [hub.restore(args.source_dir, folder)]
    else:
        lines = hub.stop(folder, remove_users=args.remove_users) or ["no hub was running"]
    for line in lines:
        print(line)
    return 0


def sandbox_report(course: Course, assignment: str | None, bwrap: str | None) -> list[str]:
    """The lines of ``sandbox``: how the sandbox runs, and each course module importable in it."""
    import tempfile

    import nbformat

    from . import sandbox
    from .judge import course_imports, needs_torch

    modules: list[str] = []
    autodiff = True   # without an assignment: what a torch exercise's sandbox offers
    if assignment:
        autodiff = False
        for notebook in course.require_source(assignment):
            cells = nbformat.read(notebook, as_version=4).cells
            autodiff = autodiff or needs_torch([c.source for c in cells if c.cell_type == "code"
                                                and c.metadata.get("nbgrader", {}).get("locked")
                                                or c.metadata.get("nbgrader", {}).get("solution")])
            modules += course_imports([c.source for c in cells if c.cell_type == "code"
                                       and c.metadata.get("nbgrader", {}).get("locked")
                                       and not c.metadata.get("nbgrader", {}).get("grade")])
    found = sandbox.find_bwrap(bwrap)
    if found is None:
        raise GradingError("sandbox: bubblewrap (bwrap) not found (tools/install-system-packages.sh)")
    with tempfile.TemporaryDirectory(prefix="ag-sandbox-") as folder:
        os.chmod(folder, 0o755)
        lease = sandbox.UidLease(1) if os.geteuid() == 0 else None
        try:
            config = sandbox.make_config(found, sandbox.Limits(), Path(folder), 1,
                                         uids=lease.uids if lease else (), modules=modules, autodiff=autodiff)
            description = sandbox.preflight(config, [course.root, course.source])
            report = sandbox.probe(config, [])
        finally:
            if lease is not None:
                lease.release()
    return [description, f"importable course modules ({len(report['modules'])}):",
            *(f"  {name}" for name in report["modules"]),
            *([f"withheld (nothing that differentiates): {', '.join(sorted(map(os.path.basename, config.withheld)))}"]
              if config.withheld else [])]


def run(args: argparse.Namespace) -> int:
    if args.command == "hub":
        return run_hub(args)
    course = Course(root=args.course_dir, source=args.source, course_id=args.course_id, exchange=args.exchange)
    if args.command == "release":
        if args.all == bool(args.assignment):
            raise GradingError("release: name one ASSIGNMENT or pass --all")
        assignments = course.source_assignments() if args.all else [args.assignment]
        if not assignments:
            raise GradingError(f"release --all: no assignments in {course.source}")
        from .release import release

        for line in release(course, assignments):
            print(line)
    elif args.command == "publish":
        from .exchange import publish

        print(publish(course, args.assignment))
    elif args.command == "return-feedback":
        from .exchange import return_feedback

        print(return_feedback(course, args.assignment, args.student))
    elif args.command in ("import", "collect"):
        from .submissions import import_submissions

        if args.command == "collect" and not course.exchange:
            raise GradingError("collect: no exchange: pass --exchange DIR (or set AUTOGRADER_EXCHANGE)")
        exchange = Path(course.exchange) if args.command == "collect" else args.from_exchange
        summary, refused = import_submissions(course, args.assignment, source=getattr(args, "source_path", None),
                                              exchange=exchange)
        for line in refused:
            print(line)
        print(summary)
        if args.command == "collect":
            from .exchange import late_submissions

            for line in late_submissions(course, args.assignment):
                print(line)
        return 1 if refused else 0
    elif args.command == "autograde":
        from .grading import GradeOptions, autograde
        from .sandbox import Limits

        options = GradeOptions(workers=args.workers, cell_timeout=args.cell_timeout,
                               notebook_timeout=args.notebook_timeout, unsafe_no_sandbox=args.unsafe_no_sandbox,
                               bwrap=args.bwrap, students=args.student,
                               limits=Limits(memory_mb=args.memory_mb, processes=args.max_processes,
                                             cpu_seconds=max(60, args.notebook_timeout + 60)))
        autograde(course, args.assignment, options)
    elif args.command == "feedback":
        from .feedback import feedback

        messages, withheld = feedback(course, args.assignment, args.student)
        for line in messages:
            print(line)
        return 1 if withheld else 0
    elif args.command == "export":
        from .export import export

        for line in export(course, args.csv, args.histogram):
            print(line)
    elif args.command == "lms":
        from . import lms

        roster = lms.roster_path(args.roster)
        if args.lms_command == "push":
            return lms.push(course, args.assignment, roster, dry_run=args.dry_run)
        return lms.members(course, roster)
    elif args.command == "sandbox":
        for line in sandbox_report(course, args.assignment, args.bwrap):
            print(line)
    elif args.command == "leakscan":
        from . import leakscan
        from .course import package_folder

        for path in args.paths:
            if not path.exists():
                raise GradingError(f"leakscan: no such file or folder: {path}")
        secrets = leakscan.course_secrets(course.source, package_folder(), args.assignment)
        kinds = ("hidden test",) if args.hidden_only else ("solution", "hidden test")
        found = leakscan.scan(args.paths, secrets, kinds)
        for leak in found:
            print(f"LEAK {leak.where}: {leak.secret.kind} line from {leak.secret.origin}: {leak.secret.line}")
        print(f"leakscan: {len(found)} leak(s) in {', '.join(map(str, args.paths))} "
              f"({len(secrets)} secret line(s) from {course.source})")
        return 1 if found else 0
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = " ".join(filter(None, (args.command, getattr(args, "hub_command", None),
                                     getattr(args, "lms_command", None))))
    try:
        return run(args)
    except GradingError as exc:
        print(f"autograder {command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"autograder {command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line for the instructor; the traceback on request
        if os.environ.get("AUTOGRADER_DEBUG"):
            traceback.print_exc()
        print(f"autograder {command}: internal error: {type(exc).__name__}: {exc} "
              "(set AUTOGRADER_DEBUG=1 for the traceback)", file=sys.stderr)
        return 2
