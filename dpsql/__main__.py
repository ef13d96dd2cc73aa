"""``python -m dpsql``: the ``dpsql`` command."""

from dpsql.cli import main

raise SystemExit(main())
