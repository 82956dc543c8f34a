"""The project's command line: `python -m <package>` and the `<package>` console script.

`make:job` and `make:cron` run from the scaffolding alone (make_cli.py and what it
imports): writing a job and its test needs neither Celery nor the settings. Every
other command runs the whole command line (cli.py).
"""

from __future__ import annotations

import sys

SCAFFOLDING = ("make:job", "make:cron")


def main() -> None:
    """Run the command line of the project this process serves."""
    from workergen_runtime import project

    if len(sys.argv) > 1 and sys.argv[1] in SCAFFOLDING:
        from workergen_runtime.cli.make import run_alone

        run_alone(sys.argv[1], sys.argv[2:], prog_name=f"python -m {project.PACKAGE}")
        return
    from workergen_runtime.cli.main import main as run_whole

    run_whole()
