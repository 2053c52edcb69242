"""Roles pointing at different models: ``llm.roles`` maps a role name (a request tag, see
``prompts.SAMPLING``) to an LLM spec like ``--llm``'s, for example a light model for the
router; roles not named there use the main model (their configs: ``spec.role_configs``).
``RoleRouter`` sends each request to its role's body behind the one ``generate`` contract."""
from __future__ import annotations

from typing import Sequence

from .base import LLMError, LLMRequest, LLMResponse, role_of
from .prompts import SAMPLING


def known_roles() -> frozenset:
    """The roles requests are tagged with (one sampling setting each)."""
    return frozenset(SAMPLING)


class RoleRouter:
    """Requests go to ``routes[role]`` when their role has a route, else to ``default``; the
    responses come back in request order. ``name`` is the default body's."""

    def __init__(self, default, routes: dict):
        self.default = default
        self.routes = dict(routes)
        self.name = getattr(default, "name", "llm")

    def body_for(self, request: LLMRequest):
        return self.routes.get(role_of(request.tag), self.default)

    def generate(self, requests: Sequence[LLMRequest]) -> list[LLMResponse]:
        requests = list(requests)
        groups: dict[int, tuple] = {}  # id(body) -> (body, [indices])
        for i, r in enumerate(requests):
            body = self.body_for(r)
            groups.setdefault(id(body), (body, []))[1].append(i)
        if len(groups) <= 1:
            return self.body_for(requests[0]).generate(requests) if requests else []
        out: list = [None] * len(requests)
        # one body after another: callers send one role per batch, so this is the rare case
        for body, idx in groups.values():
            replies = body.generate([requests[i] for i in idx])
            if len(replies) != len(idx):
                raise LLMError(getattr(body, "name", "llm"), f"{len(replies)} responses for {len(idx)} requests")
            for i, r in zip(idx, replies):
                out[i] = r
        return out

    def __getattr__(self, name):
        if name == "default":
            raise AttributeError(name)
        return getattr(self.default, name)

    def close(self) -> None:
        seen = set()
        for body in (self.default, *self.routes.values()):
            if id(body) not in seen:
                seen.add(id(body))
                body.close()
