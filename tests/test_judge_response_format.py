"""The response-format modes as units: what each sends, what counts as a refusal, how modes move."""

from __future__ import annotations

import pytest

from evalledger.stages.judge import JudgeSettings
from evalledger.stages.judge.http_outcome import classify
from evalledger.stages.judge.response_format import (
    FormatModes,
    messages_for,
    names_the_format,
    response_format_field,
)

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"],
          "additionalProperties": False}
MESSAGES = [{"role": "system", "content": "Judge."}, {"role": "user", "content": "Q"}]


def test_each_mode_sends_the_schema_its_own_way():
    assert response_format_field("json_schema", "score_trait", SCHEMA) == {
        "type": "json_schema", "json_schema": {"name": "score_trait", "schema": SCHEMA, "strict": True}}
    assert response_format_field("json_object", "score_trait", SCHEMA) == {"type": "json_object", "schema": SCHEMA}
    assert response_format_field("prompt", "score_trait", SCHEMA) is None
    assert messages_for("json_schema", MESSAGES, SCHEMA) is MESSAGES
    prompted = messages_for("prompt", MESSAGES, SCHEMA)
    assert '"required": ["score"]' in prompted[0]["content"] and MESSAGES[0]["content"] == "Judge."
    assert messages_for("prompt", MESSAGES[1:], SCHEMA)[0]["role"] == "system"


@pytest.mark.parametrize("status, body, refused", [
    (400, '{"error": {"message": "response_format json_schema is not supported"}}', True),
    (422, '{"detail": [{"loc": ["body", "response_format", "type"], "msg": "unexpected value"}]}', True),
    (500, "Internal Server Error: unsupported schema", True),
    (500, '{"error": "out of memory"}', False),
    (429, '{"error": "rate limited on json_schema requests"}', False),
    (401, '{"error": "invalid key for response_format"}', False),
    (400, '{"error": "context length exceeded"}', False),
])
def test_a_refusal_is_a_400_422_or_500_naming_the_format(status, body, refused):
    assert names_the_format(status, body) is refused


def test_modes_move_on_once_and_in_flight_refusals_follow():
    modes = FormatModes()
    assert modes.after_refusal("json_schema") == "json_object"
    assert modes.after_refusal("json_schema") == "json_object"   # in flight during the switch
    assert modes.after_refusal("json_object") == "prompt"
    assert modes.after_refusal("json_schema") == "prompt"
    assert modes.after_refusal("prompt") is None and modes.current == "prompt"
    assert FormatModes("json_object").after_refusal("json_object") == "prompt"
    with pytest.raises(ValueError, match="json_schema, json_object, prompt"):
        FormatModes("grammar")


def test_the_old_boolean_setting_still_reads():
    assert JudgeSettings(response_format=True).response_format == "json_schema"
    assert JudgeSettings(response_format=False).response_format == "prompt"
    with pytest.raises(ValueError):
        JudgeSettings(response_format="grammar")


@pytest.mark.parametrize("status, body, format_sent, kind", [
    (500, "Internal Server Error: unsupported schema", True, "refused_format"),
    (400, '{"error": "response_format json_schema is not supported"}', True, "refused_format"),
    # in the prompt mode nothing was sent to refuse: classified by the status alone
    (500, "Internal Server Error: unsupported schema", False, "transient"),
    (400, '{"error": "response_format json_schema is not supported"}', False, "rejected"),
    (500, '{"error": "out of memory"}', True, "transient"),
    (401, '{"error": "invalid key for response_format"}', True, "unavailable"),
])
def test_a_refusal_of_the_format_is_its_own_kind_of_answer(status, body, format_sent, kind):
    assert classify(status, {}, body, 1.0, format_sent=format_sent).kind == kind


def test_the_settings_take_the_mode_and_the_provider_options_together():
    settings = JudgeSettings(response_format="json_object", temperature=None, max_completion_tokens=300,
                             breaker_failures=1)
    assert settings.response_format == "json_object"
    assert settings.parameters() == {"max_completion_tokens": 300}
