"""``python -m forecast``: the ``forecast`` command line."""

import sys

from forecast.cli import console

sys.exit(console())
