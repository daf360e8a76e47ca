"""Write the offline judge's held-out set: short answers to arithmetic and factual questions.

    python benchmarks/heldout/make_heldout.py     # rewrites answers.benchmark.json beside it

The set was written before the offline parser's answer-value rules were changed and is never
used to tune them: it measures the heuristic out of sample. Every question has two responses,
``model-right`` (the correct value) and ``model-wrong`` (a plausible wrong value), each in a
phrasing drawn at random (seeded) from the ways people answer, so the expected verdict of every
case is known by construction: pass for model-right, fail for model-wrong.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
OPS = {"+": ("plus", "add", lambda a, b: a + b), "-": ("minus", "subtract", lambda a, b: a - b),
       "x": ("times", "multiply", lambda a, b: a * b), "/": ("divided by", "divide", lambda a, b: a // b)}
NUMBER_PHRASINGS = [
    "{a} {sym} {b} = {r}.",
    "{a} {sym} {b} equals {r}.",
    "The answer is {r}.",
    "That comes to {r}, since {a} {word} {b} is {r}.",
    "{r}",
    "If you {verb} {a} and {b} you get {r}.",
    "Let me compute: {a} {sym} {b}. The result is {r}.",
    "It is {r} ({a} {sym} {b}).",
    "{a} {word} {b} makes {r}.",
    "Working it out, {a} {sym} {b} gives {r}.",
]
FACTS = [  # question, field, predicate, right, wrong
    ("Which planet is the largest in our solar system?", "planet", "largest planet in our solar system", "Jupiter", "Saturn"),
    ("Which planet is known as the Red Planet?", "planet", "planet known as the Red Planet", "Mars", "Venus"),
    ("What is the hottest planet in the solar system?", "planet", "hottest planet in the solar system", "Venus", "Mercury"),
    ("Which planet is closest to the Sun?", "planet", "planet closest to the Sun", "Mercury", "Venus"),
    ("Which planet has the most prominent ring system?", "planet", "planet with the most prominent rings", "Saturn", "Neptune"),
    ("What is the largest moon of Saturn?", "moon", "largest moon of Saturn", "Titan", "Enceladus"),
    ("What is the largest moon in the solar system?", "moon", "largest moon in the solar system", "Ganymede", "Titan"),
    ("Which dwarf planet lost its planet status in 2006?", "dwarf_planet", "dwarf planet reclassified in 2006", "Pluto", "Ceres"),
    ("Which star is closest to the Sun?", "star", "nearest star to the Sun", "Proxima Centauri", "Sirius"),
    ("What is the nearest large spiral galaxy to the Milky Way?", "galaxy", "nearest large spiral galaxy", "Andromeda", "Triangulum"),
    ("Which planet rotates on its side?", "planet", "planet that spins on its side", "Uranus", "Neptune"),
    ("Which planet is farthest from the Sun?", "planet", "most distant planet from the Sun", "Neptune", "Uranus"),
    ("What is the brightest star in the night sky?", "star", "brightest star in the night sky", "Sirius", "Vega"),
    ("What is the capital of France?", "capital", "capital of France", "Paris", "Lyon"),
    ("What is the capital of Japan?", "capital", "capital of Japan", "Tokyo", "Osaka"),
    ("What is the capital of Australia?", "capital", "capital of Australia", "Canberra", "Sydney"),
    ("What is the capital of Canada?", "capital", "capital of Canada", "Ottawa", "Toronto"),
    ("What is the capital of Italy?", "capital", "capital of Italy", "Rome", "Milan"),
    ("What is the capital of Germany?", "capital", "capital of Germany", "Berlin", "Munich"),
    ("What is the capital of Egypt?", "capital", "capital of Egypt", "Cairo", "Alexandria"),
    ("What is the capital of Kenya?", "capital", "capital of Kenya", "Nairobi", "Mombasa"),
    ("Which element has the chemical symbol Fe?", "element", "element with the symbol Fe", "Iron", "Lead"),
    ("Which element has the chemical symbol Au?", "element", "element with the symbol Au", "Gold", "Silver"),
    ("Which gas do plants take in for photosynthesis?", "gas", "gas plants absorb for photosynthesis", "carbon dioxide", "oxygen"),
    ("Who wrote the play Hamlet?", "author", "author of Hamlet", "William Shakespeare", "Christopher Marlowe"),
    ("Who developed the theory of general relativity?", "scientist", "physicist behind general relativity", "Albert Einstein", "Isaac Newton"),
    ("Which ocean is the largest?", "ocean", "largest ocean on Earth", "Pacific", "Atlantic"),
    ("What is the longest river in South America?", "river", "longest river in South America", "Amazon", "Parana"),
    ("Which mountain is the highest above sea level?", "mountain", "highest mountain above sea level", "Everest", "K2"),
    ("Which organ pumps blood around the body?", "organ", "organ that pumps blood", "heart", "liver"),
]
ENTITY_PHRASINGS = [
    "{A} is the {pred}.",
    "The {pred} is {A}.",
    "It's {A}.",
    "{A}.",
    "That would be {A}.",
    "The answer is {A}.",
    "{A}, without a doubt.",
    "I believe it is {A}.",
    "{A} - it is the {pred}.",
    "Definitely {A}; it is the {pred}.",
]


def number_questions(rng: random.Random) -> list[tuple[dict, str, str]]:
    """Arithmetic questions with a right and a wrong response each."""
    out = []
    for i in range(30):
        sym = "+-x/"[i % 4]
        word, verb, fn = OPS[sym]
        a, b = rng.randint(12, 99), rng.randint(2, 60)
        if sym == "/":
            a = a * b
        r = fn(a, b)
        wrong = r + rng.choice([-10, -2, -1, 1, 3, 10])
        qid = f"n{i + 1:02d}"
        question = {"id": qid, "question": f"What is {a} {word} {b}?", "template": {"fields": [
            {"name": "result", "type": "int", "description": "The number the response gives as the result",
             "ground_truth": r, "verify_with": {"type": "NumericTolerance", "tolerance": 0, "mode": "absolute"}}]}}
        texts = [rng.choice(NUMBER_PHRASINGS).format(a=a, b=b, sym=sym, word=word, verb=verb, r=value)
                 for value in (r, wrong)]
        out.append((question, texts[0], texts[1]))
    return out


def fact_questions(rng: random.Random) -> list[tuple[dict, str, str]]:
    """Factual questions whose answer is a name, with a right and a wrong response each."""
    out = []
    for i, (text, field, pred, right, wrong) in enumerate(FACTS):
        qid = f"f{i + 1:02d}"
        question = {"id": qid, "question": text, "template": {"fields": [
            {"name": field, "type": "str", "description": f"The {field.replace('_', ' ')} the response names",
             "ground_truth": right, "verify_with": {"type": "ExactMatch", "normalize": ["lowercase", "strip"]}}]}}
        texts = [rng.choice(ENTITY_PHRASINGS).format(A=value, pred=pred) for value in (right, wrong)]
        out.append((question, texts[0], texts[1]))
    return out


def main() -> None:
    """Write answers.benchmark.json (seed 2026)."""
    rng = random.Random(2026)
    items = number_questions(rng) + fact_questions(rng)
    benchmark = {
        "format": "evalledger/benchmark@1",
        "name": "offline-heldout-answers",
        "description": "Held-out short answers for measuring the offline judge's parser (see make_heldout.py).",
        "config": {"deep_judgment_enabled": False},
        "questions": [q for q, _, _ in items],
        "responses": [{"question_id": q["id"], "model": model, "text": text}
                      for q, right, wrong in items for model, text in (("model-right", right), ("model-wrong", wrong))],
    }
    (HERE / "answers.benchmark.json").write_text(json.dumps(benchmark, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
