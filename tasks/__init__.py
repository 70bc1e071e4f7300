"""evalkit's tasks (installed as `evalkit.tasks`): what is asked and how it is scored."""
