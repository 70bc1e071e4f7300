"""Long-context tasks generated offline: passkey, RULER-style NIAH / vt / cwe / fwe,
key-value retrieval, many-shot and long-decode GSM8K. `generators` builds examples by unit
count (no tokenizer); `fitting` sizes them to a target length in a model's tokens."""
