"""``python -m fastkern``: the fastkern command line."""
import sys

from fastkern.cli import main

if __name__ == "__main__":
    sys.exit(main())
