"""The data of `tiny_arith.yaml`, a tiny lm-eval generate_until task for evalkit's tests.

The fake OpenAI server (tests/helpers/faulty_server.py) answers every prompt with a number derived
from its hash; docs 0, 2 and 4 carry that number as their answer, docs 1, 3 and 5 the true sum, so a
run against the fake server must score exactly docs 0, 2 and 4 right.
"""

ROWS = [
    {"question": "What is 0 plus 1?", "answer": "29"},
    {"question": "What is 1 plus 2?", "answer": "3"},
    {"question": "What is 2 plus 3?", "answer": "50"},
    {"question": "What is 3 plus 4?", "answer": "7"},
    {"question": "What is 4 plus 5?", "answer": "25"},
    {"question": "What is 5 plus 6?", "answer": "11"},
]


def docs(**_metadata):
    import datasets

    return {"test": datasets.Dataset.from_list(ROWS)}
