"""``python -m arrowkafka`` is the ``arrowkafka`` command."""

import sys

from arrowkafka.cli import main

sys.exit(main())
