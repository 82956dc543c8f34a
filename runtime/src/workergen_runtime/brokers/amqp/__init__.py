"""RabbitMQ: lane policies (dead-lettering by policy), and the dead-letter store."""
