"""``python -m pipeline_steps`` runs the ``certgate`` CLI."""

import sys

from pipeline_steps.cli import main

sys.exit(main())
