"""``python -m zoo ...`` is the ``zoo`` command (``torchrun -m zoo sample ...`` launches it per process)."""
import sys

from zoo.cli import main

if __name__ == "__main__":
    sys.exit(main())
