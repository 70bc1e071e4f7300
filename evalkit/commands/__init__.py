"""One module per `evalkit` subcommand (see `evalkit.cli`)."""
