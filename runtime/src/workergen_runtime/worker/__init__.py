"""The worker: its intake of messages, deliveries, pool and start-up."""
