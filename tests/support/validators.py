"""Real validators for the deploy files: found on PATH or installed from a registry.

Locally a missing validator skips its test with how to install it; under CI=true it fails.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support.brokers import IN_CI

# KEDA's CRDs as compiled validators, from the npm registry (the ScaledObject and
# TriggerAuthentication schemas of kedacore's CRDs).
KEDA_MODELS = "@kubernetes-models/keda@0.4.2"
KEDA_VALIDATE = """
const kinds = require("@kubernetes-models/keda/keda.sh/v1alpha1");
const docs = JSON.parse(require("fs").readFileSync(0, "utf8"));
let bad = 0;
for (const doc of docs) {
  const Kind = kinds[doc.kind];
  if (!Kind) { bad++; console.log(`INVALID ${doc.kind}: not a KEDA kind`); continue; }
  try { new Kind(doc).validate(); console.log(`ok ${doc.kind} ${doc.metadata.name}`); }
  catch (e) {
    bad++;
    console.log(`INVALID ${doc.kind} ${doc.metadata && doc.metadata.name}: ${e.message}`);
  }
}
process.exit(bad ? 1 : 0);
"""


def missing(what: str, hint: str) -> None:
    """Skip (or fail under CI=true): a validator is not installed."""
    reason = f"{what} is not installed; {hint}"
    if IN_CI:
        pytest.fail(f"CI=true requires every validator: {reason}", pytrace=False)
    pytest.skip(reason)


def require_tool(name: str, hint: str) -> str:
    """The path of a command on PATH, or skip/fail saying how to get it."""
    path = shutil.which(name)
    if path is None:
        missing(name, hint)
    return str(path)


def keda_validator(cache: Path) -> Path:
    """A folder where `node validate.js` checks KEDA objects against KEDA's CRD schemas."""
    require_tool("node", "apt-get install -y nodejs npm")
    npm = require_tool("npm", "apt-get install -y nodejs npm")
    folder = cache / "keda-validator"
    script = folder / "validate.js"
    folder.mkdir(parents=True, exist_ok=True)
    # Installed once, under a lock: two test workers may get here at once, and a
    # half-installed node_modules must never pass for a finished one.
    installed = folder / ".installed"
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed.is_file():
            done = subprocess.run(
                [
                    npm,
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--silent",
                    "--prefix",
                    str(folder),
                    KEDA_MODELS,
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if done.returncode != 0:
                missing(KEDA_MODELS, f"npm install failed: {done.stderr[-500:]}")
            installed.write_text(KEDA_MODELS)
        script.write_text(KEDA_VALIDATE)
    return folder


def validate_keda(folder: Path, documents: list[dict]) -> subprocess.CompletedProcess[str]:
    """Run the KEDA validator on the documents; its output names every invalid one."""
    return subprocess.run(
        ["node", str(folder / "validate.js")],
        input=json.dumps(documents),
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
    )
