"""The example job a new project starts with is written as `make:job` writes a job."""

from __future__ import annotations

from pathlib import Path

from workergen_runtime.scaffold import MakeRequest, make


def test_hello_follows_what_make_job_writes(render, tmp_path: Path) -> None:
    hello = (render(broker="redis") / "billing" / "jobs" / "hello.py").read_text().splitlines()
    make(tmp_path, MakeRequest("job", "hello"), package="billing", lanes=("default",))
    made = (tmp_path / "billing" / "jobs" / "hello.py").read_text().splitlines()

    structure = [line for line in made if line.startswith(("@job(", "class ", "from "))]
    assert structure
    for line in structure:
        assert line in hello
