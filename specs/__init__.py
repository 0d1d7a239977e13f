"""Apache Kafka's JSON message specs, vendored as data (see SOURCE.md); no code."""
