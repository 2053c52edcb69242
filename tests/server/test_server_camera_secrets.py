"""Camera-URL secrets over HTTP, in every vendor form of tests/support/camera_urls.py: an admin
adds a live camera per form to the real server (uvicorn on loopback; each camera's host is a
closed loopback port, so it fails to connect and says why); a read token listing the cameras
and reading their status sees every URL with its secret masked and ordinary URLs unchanged,
the engine's status holds none, no log line holds one, and neither do the bytes of the store's
SQLite files (the sources table keeps the masked URL)."""
import time
from urllib.parse import urlsplit, urlunsplit

import pytest

from support.camera_urls import MARKS, ORDINARY, SECRETS
from support.logs import captured_logs
from support.server import ServerThread, config
from vam_engine.engine import Engine
from vam_engine.server import ServeOptions, TokenStore, create_app
from vam_engine.urls import MASK

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 180
SCHEMES = {"wss": "https", "ws": "http"}  # cameras take the HTTP forms of these


def on_closed_port(url: str) -> str:
    """``url`` addressed to 127.0.0.1:9 (nothing listens: the camera fails at once), its user
    information, path, query and fragment as they were."""
    p = urlsplit(url)
    user = p.netloc.rsplit("@", 1)[0] + "@" if "@" in p.netloc else ""
    return urlunsplit((SCHEMES.get(p.scheme, p.scheme), f"{user}127.0.0.1:9", p.path, p.query, p.fragment))


CAMERAS = {f"secret-{i}": on_closed_port(url) for i, (_, url, _) in enumerate(SECRETS)}
PLAIN = {f"plain-{i}": on_closed_port(url) for i, url in enumerate(ORDINARY[:4])}


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = Engine(tmp_path_factory.mktemp("secrets") / "store", config() | {"writer": {"enabled": False}},
                 device="cpu")
    yield eng
    eng.close()


def test_no_camera_secret_is_shown_logged_or_stored(engine, tmp_path):
    import httpx

    tokens = TokenStore(tmp_path / "tokens")
    admin = {"Authorization": f"Bearer {tokens.create('admin')[1]}"}
    reader = {"Authorization": f"Bearer {tokens.create('read')[1]}"}
    app = create_app(engine, ServeOptions(tokens_dir=str(tmp_path / "tokens"),
                                          max_cameras_per_token=len(CAMERAS) + len(PLAIN)))
    srv = ServerThread(app)
    shown = []
    with captured_logs() as logs, srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        for cam, url in {**CAMERAS, **PLAIN}.items():
            r = c.post("/api/cameras", json={"camera_id": cam, "url": url, "max_retries": 0}, headers=admin)
            assert r.status_code == 201, (cam, r.text)
            shown.append(r.text)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # every camera tried, failed and said why
            listed = {x["camera_id"]: x["status"] for x in c.get("/api/cameras", headers=reader).json()["cameras"]}
            if all(listed[cam].get("error") for cam in CAMERAS):
                break
            time.sleep(0.2)
        assert all(listed[cam].get("error") for cam in CAMERAS), listed
        for cam in CAMERAS:
            assert MASK in listed[cam]["url"], listed[cam]
            shown.append(c.get(f"/api/cameras/{cam}/status", headers=reader).text)
        for cam, url in PLAIN.items():
            assert listed[cam]["url"] == url  # ordinary paths and queries shown as they are
        shown.append(str(listed))
        shown += [repr(s) for s in engine.status()]
        for cam in {**CAMERAS, **PLAIN}:
            assert c.delete(f"/api/cameras/{cam}", headers=admin).status_code in (200, 204)
    text = "\n".join(shown) + "\n" + logs.text
    leaked = [m for m in MARKS if m in text]
    assert not leaked, [ln for ln in text.splitlines() if any(m in ln for m in leaked)][:5]
    stored = b"".join(p.read_bytes() for p in engine.store.root.glob("store.sqlite*"))
    assert b"127.0.0.1:9" in stored  # the sources table has the cameras' URLs...
    assert not [m for m in MARKS if m.encode() in stored]  # ...masked
