"""Redis: the transport with holder recovery, and the dead-letter store."""
