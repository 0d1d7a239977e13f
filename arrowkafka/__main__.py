"""``python -m arrowkafka`` is the ``arrowkafka`` command."""

from arrowkafka.cli import command

command()
