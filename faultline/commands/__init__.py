"""Subcommands of ``faultline``: one module each, with ``register(subparsers)``.

Each ``register`` adds its parser with ``set_defaults(func=run)`` where
``run(args) -> int``; raise ``faultline.cli.CliError`` for user-facing failures."""
