"""The accounts app's jobs: every module here is discovered."""
