"""Glue for continuous integration: posting evalkit's paired report on a pull request."""
