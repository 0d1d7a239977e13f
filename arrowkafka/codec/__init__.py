"""Stage 6: batches of message bodies to Arrow and back, on a plan and its kernels.

``decode``: bodies (arrays, lists, or ``Ranges`` of one buffer) -> one record batch in two
kernel passes, typed errors or a rejects table. ``encode``: Arrow rows -> bodies in two kernel
passes, with Kafka's rules for writing. Both take a ``MessageSpec``; ``arrowkafka.api`` binds
them to a set of specs.
"""
