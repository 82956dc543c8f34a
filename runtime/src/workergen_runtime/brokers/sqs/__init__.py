"""Amazon SQS: the transport that quarantines unreadable envelopes, and the dead-letter store."""
