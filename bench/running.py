"""What the benchmarks share: a project rendered from this checkout, processes stopped by PID."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def render_project(dest: Path, package: str, **answers: str) -> Path:
    """A project generated from the working tree's template with these answers."""
    data = [arg for name, value in answers.items() for arg in ("--data", f"{name}={value}")]
    subprocess.run(
        [
            str(Path(sys.executable).parent / "copier"),
            "copy",
            "--trust",
            "--defaults",
            "--quiet",
            "--data",
            f"project_name={package}",
            *data,
            str(REPO),
            str(dest),
        ],
        check=True,
        capture_output=True,
    )
    return dest


def stop(process: subprocess.Popen[bytes]) -> None:
    """Warm shutdown by PID, then kill that PID if it does not stop."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
