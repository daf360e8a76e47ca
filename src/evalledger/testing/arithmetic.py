"""The arithmetic workload of issue 15's measurements, as a native benchmark file.

Each question asks for a product and whether it is even (two template fields); two models answer
it, ``right`` and ``wrong`` (off by one), with deep judgment on. The replay, run, scale, memory and
storage benchmarks and the blob-store tests judge it with the offline judge.
"""

from __future__ import annotations


def arithmetic_benchmark(questions: int, name: str) -> dict:
    """A native benchmark (``evalledger/benchmark@1``) of ``questions`` questions, each answered by
    the models ``right`` and ``wrong``: ``2 * questions`` cases."""
    items, responses = [], []
    for i in range(questions):
        a, b = 12 + i % 80, 3 + i % 17
        items.append({"id": f"q{i}", "question": f"What is {a} times {b}, and is it even?", "template": {"fields": [
            {"name": "result", "type": "int", "description": "The product", "ground_truth": a * b,
             "verify_with": {"type": "NumericTolerance", "tolerance": 0, "mode": "absolute"}},
            {"name": "even", "type": "bool", "description": "Whether the product is even",
             "ground_truth": a * b % 2 == 0, "verify_with": {"type": "BooleanMatch"}}]}})
        for model, value in (("right", a * b), ("wrong", a * b + 1)):
            responses.append({"question_id": f"q{i}", "model": model,
                              "text": f"{a} x {b} = {value}. It is {'even' if value % 2 == 0 else 'odd'}."})
    return {"format": "evalledger/benchmark@1", "name": name, "questions": items, "responses": responses,
            "config": {"deep_judgment_enabled": True}}
