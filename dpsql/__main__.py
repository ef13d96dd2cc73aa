"""``python -m dpsql``: the ``dpsql`` command."""

from dpsql.interfaces.cli import main

raise SystemExit(main())
