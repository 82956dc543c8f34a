"""The console script's process spares the cycle collector; a caller's process keeps it."""

from __future__ import annotations

import contextlib
import gc
import io
import subprocess
import sys
import textwrap
from pathlib import Path

from workergen.entry import main


def test_a_run_inside_another_process_leaves_its_collector_as_it_was():
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main(["--help"])
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def test_the_console_script_runs_without_the_collector_and_freezes_at_exit(tmp_path: Path):
    # The console script calls main() without arguments. What is alive at exit is frozen
    # after the exit handlers registered while the command ran (the last one here), before
    # those registered ahead of it (the first one); and the project is whole.
    code = textwrap.dedent(f"""\
        import atexit, gc, sys
        sys.argv = ["workergen", "new", {str(tmp_path / "demo")!r}, "--defaults"]
        from workergen.entry import main
        atexit.register(lambda: print("first handler, frozen:", gc.get_freeze_count() > 0))
        try:
            main()
        finally:
            print("collector on:", gc.isenabled())
            atexit.register(lambda: print("last handler, frozen:", gc.get_freeze_count() > 0))
        """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "collector on: False" in done.stdout
    assert "last handler, frozen: False" in done.stdout
    assert "first handler, frozen: True" in done.stdout
    assert (tmp_path / "demo" / ".copier-answers.yml").is_file()
