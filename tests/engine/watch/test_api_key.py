"""API keys for a server started with ``--api-key``: where stepview reads one, that it is
presented on every call, that a 401 says what to set, and that the key is never shown."""

from __future__ import annotations

import pytest

from stepview.cli.args import parse_own_args
from stepview.engine.watch.api.api_key import ApiKey, resolve_api_key
from stepview.engine.watch.api.server_api import ApiError, ServerApi
from tests.engine.watch.fake_api import FakeApi

SECRET = "sk-test-9f8e7d"


def test_the_flag_wins_then_vllms_variable_then_openais() -> None:
    env = {"VLLM_API_KEY": "from-vllm", "OPENAI_API_KEY": "from-openai"}
    assert resolve_api_key("from-flag", env) == ApiKey("--api-key", "from-flag")
    assert resolve_api_key(None, env) == ApiKey("VLLM_API_KEY", "from-vllm")
    assert resolve_api_key(None, {"OPENAI_API_KEY": "o", "VLLM_API_KEY": "  "}) == ApiKey(
        "OPENAI_API_KEY", "o"
    )
    assert resolve_api_key(None, {}) is None
    assert resolve_api_key(" ", {}) is None


def test_the_key_is_in_no_repr_str_or_parsed_options() -> None:
    key = ApiKey("VLLM_API_KEY", SECRET)
    assert SECRET not in repr(key) and SECRET not in str(key)
    assert str(key) == "the API key from VLLM_API_KEY"
    own, _ = parse_own_args(
        ["--attach", "tcp://h:1", "--api", "http://h:8000", "--api-key", SECRET]
    )
    assert own.api_key == SECRET
    assert SECRET not in repr(own)


def test_a_server_that_wants_a_key_says_which_to_set(fake_api: FakeApi) -> None:
    fake_api.api_key = SECRET
    with pytest.raises(ApiError) as no_key:
        ServerApi(fake_api.url).model()
    assert no_key.value.status == 401
    assert str(no_key.value) == (
        "the server wants an API key (401 Unauthorized): give it with --api-key, "
        "or set VLLM_API_KEY or OPENAI_API_KEY"
    )
    with pytest.raises(ApiError) as wrong:
        ServerApi(fake_api.url, ApiKey("OPENAI_API_KEY", "nope")).model()
    assert (
        str(wrong.value) == "the server refused the API key from OPENAI_API_KEY (401 Unauthorized)"
    )
    assert "nope" not in str(wrong.value)


def test_the_right_key_is_presented_on_every_call(fake_api: FakeApi) -> None:
    fake_api.api_key = SECRET
    api = ServerApi(fake_api.url + "/v1", ApiKey("--api-key", SECRET))
    assert api.model().name == "tiny"
    assert api.detokenize([7, 8]) == " w7 w8"  # an unguarded route gets the key too
    assert fake_api.authorizations and set(fake_api.authorizations) == {f"Bearer {SECRET}"}
