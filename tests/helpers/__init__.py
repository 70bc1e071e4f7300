"""Test helpers owned by the run/serve issue (a misbehaving OpenAI-compatible server, fakes)."""
