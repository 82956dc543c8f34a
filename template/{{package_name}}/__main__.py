"""`python -m` entry point.

`make:job` and `make:cron` run from the core's scaffolding alone (`core/make_cli.py` and the
modules it imports), loaded under a private name so that the core package's `__init__`, which
imports Celery and the settings, does not run: writing a job and its test needs neither.
Every other command runs the whole command line.
"""

import sys

SCAFFOLDING = ("make:job", "make:cron")


def _run_scaffolding(spelling: str) -> None:
    import importlib
    import types
    from pathlib import Path

    alias = f"{__package__}._scaffolding"
    shell = types.ModuleType(alias)
    shell.__path__ = [str(Path(__file__).parent / "core")]
    sys.modules[alias] = shell
    make_cli = importlib.import_module(f"{alias}.make_cli")
    make_cli.run_alone(spelling, sys.argv[2:], prog_name=f"python -m {__package__}")


if len(sys.argv) > 1 and sys.argv[1] in SCAFFOLDING:
    _run_scaffolding(sys.argv[1])
else:
    from .core.cli import main

    main()
