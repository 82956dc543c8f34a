"""`python -m workergen`."""

from workergen.entry import main

main()
