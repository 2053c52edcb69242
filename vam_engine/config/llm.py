"""The model (``llm``)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Section


class LLMConfig(Section):
    """The model (llm/__init__.py: ``make_llm``). ``server_priority``: several engines (the shards of
    a cluster node) sharing one OpenAI-compatible server cannot order their requests with their own
    two-tier schedulers; "vllm" (server started with ``--scheduling-policy priority``) or "sglang"
    (``--enable-priority-scheduling``) sends each request's class in the server's ``priority``
    field, so the server serves answers and monitor checks before document writing across them
    (llm/openai_http.py: ``SERVER_PRIORITY``). None (default): no field, for servers that reject it."""

    backend: Literal["none", "local", "openai"] = Field(
        "none", description="none: no event documents or forest summaries are written")
    model: str | None = Field(None, description="local: a Qwen-VL checkpoint directory; openai: the model name")
    url: str | None = Field(None, description="openai: base URL of the server, e.g. http://127.0.0.1:8000/v1")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the server's key")
    timeout_s: float = Field(120.0, gt=0, description="one request, connect to last byte")
    max_retries: int = Field(4, ge=0, description="retries of a request on 429/5xx/timeouts, with backoff")
    concurrency: int = Field(8, ge=1, description="requests in flight to a server at once")
    max_batch: int = Field(8, ge=1, description="requests per generate() call")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto", description="local: the model's dtype; auto: bfloat16 on CUDA, float32 on the CPU")
    kv_cache_bytes: int = Field(2 << 30, ge=0, description="local: memory for cached prefixes (LRU); 0 = off")
    max_image_side: int = Field(1280, ge=16, description="images are resized to fit this square")
    max_image_bytes: int = Field(5 << 20, ge=1024, description="images are recompressed below this")
    backend_slots: int | None = Field(None, ge=1, description="openai: connections backend work (documents, "
                                                              "summaries) may hold at once; None = concurrency - 1 "
                                                              "(at least 1), keeping one for answers")
    backend_every: int = Field(4, ge=1, description="while backend work waits, frontend batches in a row before "
                                                    "one backend batch (backend is never starved)")
    server_priority: Literal["vllm", "sglang"] | None = Field(
        None, description="openai: send each request's priority class in the server's priority field (vllm: "
                          "--scheduling-policy priority; sglang: --enable-priority-scheduling); None = no field")
    roles: dict[str, str] = Field(default_factory=dict, description="role -> LLM spec like --llm's (e.g. a light "
                                                                   "model for 'router'); other roles use this model")

    @model_validator(mode="after")
    def _backend_slots_fit(self):
        if self.backend_slots is not None and self.backend_slots > self.concurrency:
            raise ValueError(f"llm.backend_slots ({self.backend_slots}) cannot exceed llm.concurrency "
                             f"({self.concurrency})")
        return self
