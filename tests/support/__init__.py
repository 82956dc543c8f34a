"""Helpers shared by the test suite: brokers, rendered projects and workers."""
