"""`python -m` entry point."""

from .core.cli import main

main()
