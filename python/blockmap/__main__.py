"""``python -m blockmap``: the ``blockmap`` command (see docs/cli.md)."""

from blockmap._cli import main

raise SystemExit(main())
