"""`python -m workergen`."""

from workergen.cli import main

main()
