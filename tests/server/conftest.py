"""The server tests' in-process clients (FastAPI's TestClient over ``create_app``) and the page
tests' browser."""
import pytest
from fastapi.testclient import TestClient

from vam_engine.server import ServeOptions, create_app


@pytest.fixture
def client_for(tmp_path):
    """``client_for(engine, **ServeOptions fields)``: a started client addressed to loopback;
    tokens in ``tmp_path / "tokens"`` unless ``tokens_dir`` says otherwise. Closed after the test."""
    made = []

    def make(engine, **opts):
        opts.setdefault("tokens_dir", str(tmp_path / "tokens"))
        c = TestClient(create_app(engine, ServeOptions(**opts)), base_url="http://127.0.0.1:8000")
        c.__enter__()
        made.append(c)
        return c
    yield make
    for c in made:
        c.__exit__(None, None, None)


@pytest.fixture
def browser():
    """A headless Chromium (tests/support/browser.py) keeping the page's console log; quit after the test."""
    from support.browser import chrome

    d = chrome(console_log=True)
    yield d
    d.quit()
