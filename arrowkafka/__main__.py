"""``python -m arrowkafka`` is the ``arrowkafka`` command."""

import sys

from .cli import main

sys.exit(main())
