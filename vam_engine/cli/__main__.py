"""``python -m vam_engine.cli``: the same as ``vam-engine``."""
import sys

from . import main

sys.exit(main())
