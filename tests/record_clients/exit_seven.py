"""An agent that makes no model call and exits 7."""

import sys

sys.exit(7)
