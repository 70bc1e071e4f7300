"""Backends answer generation requests: the in-process engine (`local`) or a remote server (`openai`)."""
