"""The RULER task names, written out by hand once for every test that checks a task listing.

Tests compare the registry, the lm-eval YAMLs and the long-context builders against this list, so
it is spelt out here rather than read back from the code under test."""

from __future__ import annotations

RULER_TASKS = [
    "passkey",
    "niah_single_1",
    "niah_single_2",
    "niah_single_3",
    "niah_multikey_1",
    "niah_multikey_2",
    "niah_multikey_3",
    "niah_multivalue",
    "niah_multiquery",
    "vt",
    "cwe",
    "fwe",
    "kv_retrieval",
    "kv_retrieval_uuid",
]
