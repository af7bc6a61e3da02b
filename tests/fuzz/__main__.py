"""``python -m tests.fuzz``: a fuzz campaign (options: ``python -m tests.fuzz --help``)."""
from __future__ import annotations

import sys

from .campaign import main

sys.exit(main())
