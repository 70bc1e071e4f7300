"""A deterministic producer writing through RunWriter, for the SIGKILL/resume test.

    python producer.py OUT_DIR N_DOCS SLEEP_S

Writes N_DOCS samples (two lengths each, skipping keys already on disk) and prints one line per
sample so the test can kill it mid-way. Every field depends only on (doc, length): an
interrupted-then-resumed run must end byte-identical to an uninterrupted one.
"""

import hashlib
import sys
import time

from evalkit.store import RunWriter, config_hash, prompt_hash

TASK_CONFIG = {"name": "toy_passkey", "lengths": [1024, 4096]}
MANIFEST = {
    "command": ["producer.py"],
    "model": {"path": "toy", "config_hash": "0" * 64},
    "backend": {"name": "local"},
    "arm": {"label": "fp16", "state_dtype": "float16"},
    "tasks": {"toy_passkey": {"config": TASK_CONFIG, "hash": config_hash(TASK_CONFIG)}},
    "seeds": {"data": 7},
}


def sample(doc: int, length: int) -> dict:
    h = int(hashlib.sha256(f"{doc}:{length}".encode()).hexdigest(), 16)
    right = h % 5 != 0
    return {
        "task": "toy_passkey",
        "doc_id": doc,
        "length": length,
        "prompt_hash": prompt_hash(f"prompt {doc} at {length} tokens"),
        "target": str(h % 100000),
        "response": str(h % 100000 if right else h % 777),
        "correct": {"string_match": right},
        "error": None,
        "n_generated": 7,
        "finish_reason": "stop",
        "flags": [],
    }


def main() -> None:
    out, n_docs, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    writer = RunWriter.open(out, MANIFEST)
    done = writer.done_keys
    print(f"resumed with {len(done)}", flush=True)
    for doc in range(n_docs):
        for length in TASK_CONFIG["lengths"]:
            if ("toy_passkey", str(doc), length) in done:
                continue
            writer.append(sample(doc, length))
            print(f"wrote {doc} {length}", flush=True)
            time.sleep(pause)
    writer.finish()
    print("finished", flush=True)


if __name__ == "__main__":
    main()
