"""The broker-specific parts of the runtime: one subpackage per broker."""
