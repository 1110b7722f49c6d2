"""``python -m blockmap.metatrain``: see :func:`blockmap.metatrain.main`."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
