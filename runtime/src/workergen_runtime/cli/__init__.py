"""The command line's doorways: each module turns options into calls of the domain code."""
