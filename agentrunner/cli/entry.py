"""The ``agentrunner`` console script: quiet on Ctrl-C even while the program is loading.

Loading the command line takes a moment; a Ctrl-C in that moment is a cancel like any other
(exit 130, one word), not a traceback. This covers loading the parser; the command's own
module (the SDKs, Textual) loads in :func:`agentrunner.cli.main.main`, which says the same.
"""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from agentrunner.cli.main import main as run  # a Ctrl-C while loading lands here
    except KeyboardInterrupt:
        sys.stderr.write("cancelled\n")
        return 130
    return run()


if __name__ == "__main__":
    sys.exit(main())
