"""The ``answer`` role: an answering model answers a benchmark question (Karenina's answering models).

The answer is asked through the judge port like any judge call, so it is recorded as a
``judge.called`` event, reused by request hash and replayable; the stages then judge it as if
the response had been dropped in.
"""

from __future__ import annotations

from pydantic import field_validator

from evalledger.stages.judge.roles import Model


class AnswerRequest(Model):
    """A question to answer, as the benchmark asks it."""

    question: str


class AnswerReply(Model):
    """The answering model's answer, as text."""

    answer: str

    @field_validator("answer")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the answer is empty: answer the question in the 'answer' text")
        return value


def answer_messages(req: AnswerRequest) -> list[dict[str, str]]:
    """answer: the question alone, with an instruction to reply in the JSON shape."""
    system = ("Answer the user's question accurately and completely. Reply with a JSON object "
              '{"answer": "<your answer as text>"} and nothing else.')
    return [{"role": "system", "content": system}, {"role": "user", "content": req.question}]
