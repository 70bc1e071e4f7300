"""`serve --api-key` as vLLM's: `/v1/*` needs `Authorization: Bearer KEY` (a bare key is refused);
`/health` stays public, `/version` tells a caller without the key only the version, and the API
description and `/metrics` need the key."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from evalkit.backends.local import make_params
from evalkit.serve.app import create_app
from evalkit.serve.engine_adapter import EngineAdapter
from evalkit.serve.engine_loop import EngineLoop

KEY = "s3cret"
DESCRIBE = {"model": {"path": "/abs/path/to/ckpt", "weights_fingerprint": "w123"}, "state_dtype": "fp32"}


@pytest.fixture(scope="module")
def client(tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine

    engine = LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp32", device="cpu", max_num_seqs=2)
    loop = EngineLoop(EngineAdapter(engine)).start()
    app = create_app(loop, engine.tokenizer, make_params, model_name="tiny", describe=DESCRIBE, api_key=KEY)
    try:
        yield TestClient(app, raise_server_exceptions=False)
    finally:
        loop.stop()


def bearer(key: str = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_v1_needs_bearer_and_the_key(client):
    body = {"prompt": "Hi", "max_tokens": 1}
    for headers in ({}, {"Authorization": KEY}, {"Authorization": "Basic " + KEY}, bearer("nope")):
        r = client.post("/v1/completions", json=body, headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == 401, headers
        assert r.headers["www-authenticate"] == "Bearer"
    assert client.post("/v1/completions", json=body, headers=bearer()).status_code == 200
    assert client.get("/v1/models", headers={"Authorization": f"bearer {KEY}"}).status_code == 200


def test_health_is_public(client):
    assert client.get("/health").status_code == 200


def test_version_hides_the_model_without_the_key(client):
    public = client.get("/version")
    assert public.status_code == 200 and public.json()["version"].startswith("evalkit ")
    assert "/abs/path" not in public.text and "w123" not in public.text and "fp_" not in public.text
    full = client.get("/version", headers=bearer()).json()
    assert full["engine"]["model"]["path"] == "/abs/path/to/ckpt" and full["system_fingerprint"]


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/openapi.json", "/metrics"])
def test_docs_and_metrics_need_the_key(client, path):
    assert client.get(path).status_code == 401
    assert client.get(path, headers={"Authorization": KEY}).status_code == 401
    assert client.get(path, headers=bearer()).status_code == 200
