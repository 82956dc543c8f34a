"""`python -m` entry point: the worker runtime's command line, for this project."""

from workergen_runtime.cli.entry import main

if __name__ == "__main__":
    main()
