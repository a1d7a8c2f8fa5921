"""``python -m p4gen.controller ctl ...`` (the same commands as ``p4gen ctl``)."""

import sys

from .cli import main

sys.exit(main())
