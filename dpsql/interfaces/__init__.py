"""How people reach dpsql: the command line, the REPL, output formats, the demo."""
