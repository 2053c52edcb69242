"""The service's tokens (server/auth.py) and its refusal to listen beyond loopback without one:
hashes only, mode 0600, revocation seen by a running server, scopes and camera limits, and the
``vam-engine token`` / ``serve`` commands."""
import json
import os
import stat

import pytest

from vam_engine.cli import main
from vam_engine.errors import VamError
from vam_engine.server.tokens import ANONYMOUS, CameraForbidden, Principal, TokenStore
from vam_engine.server.auth import check_bind, is_loopback


def test_a_token_is_stored_as_its_hash_only_in_a_private_file(tmp_path):
    ts = TokenStore(tmp_path)
    info, token = ts.create("read", ["front", "yard"], label="ops")
    raw = (tmp_path / "tokens.json").read_text()
    secret = token.split("_", 2)[2]  # vam_<id>_<secret>; the secret may hold "_" itself
    assert token.startswith(f"vam_{info.token_id}_") and len(secret) >= 32
    assert token not in raw and secret not in raw
    assert stat.S_IMODE(os.stat(tmp_path / "tokens.json").st_mode) == 0o600
    assert json.loads(raw)["tokens"][0]["token_id"] == info.token_id
    got = TokenStore(tmp_path).verify(token)  # a fresh reader (another process) finds it
    assert got.token_id == info.token_id and got.scope == "read" and got.cameras == ("front", "yard")


def test_wrong_tokens_are_refused(tmp_path):
    ts = TokenStore(tmp_path)
    _, token = ts.create("admin")
    other = TokenStore(tmp_path / "other")
    _, foreign = other.create("admin")
    head, tid, secret = token.split("_", 2)
    flipped = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    for bad in (None, "", "Bearer", foreign, f"{head}_{tid}_{flipped}", token + "x", token[:-1], "vam_zzzz_" + secret):
        assert ts.verify(bad) is None, bad
    assert ts.verify(token) is not None


def test_revoking_applies_to_a_running_reader_at_once(tmp_path):
    server_view = TokenStore(tmp_path)  # what a running server holds
    info, token = TokenStore(tmp_path).create("write")
    assert server_view.verify(token) is not None
    assert TokenStore(tmp_path).revoke(info.token_id)
    assert server_view.verify(token) is None and server_view.tokens() == {}
    assert server_view.required()  # the store has had a token: it keeps needing one
    assert not TokenStore(tmp_path).revoke(info.token_id)


def test_bad_scope_cameras_and_a_corrupt_file_are_named(tmp_path):
    ts = TokenStore(tmp_path)
    with pytest.raises(VamError, match="--scope"):
        ts.create("root")
    with pytest.raises(VamError, match="--cameras"):
        ts.create("read", ["front", ""])
    (tmp_path / "tokens.json").write_text("{not json")
    with pytest.raises(VamError, match="tokens.json"):
        ts.verify("vam_00000000_" + "a" * 43)


def test_scopes_are_ordered_and_camera_limits_hold():
    read = Principal("t1", "read", None)
    assert read.allows("read") and not read.allows("write") and not read.allows("admin")
    assert Principal("t2", "admin", None).allows("write") and ANONYMOUS.allows("admin")
    lim = Principal("t3", "admin", ("front",))
    assert lim.camera_scope(None) == ["front"] and lim.camera_scope("front") == ["front"]
    with pytest.raises(CameraForbidden, match="yard"):
        lim.camera_scope(["front", "yard"])
    assert lim.sees("front") and not lim.sees("yard") and not lim.sees("*")
    assert read.camera_scope(None) is None


def test_serve_refuses_another_address_without_a_token(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["serve", "--store", str(store), "--host", "0.0.0.0", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0" in err and "vam-engine token create" in err
    assert not (store / "store.sqlite").exists()  # refused before anything was opened
    ts = TokenStore(store)
    with pytest.raises(VamError):
        check_bind("192.168.1.20", ts)
    check_bind("127.0.0.1", ts)
    check_bind("::1", ts)
    ts.create("read")
    check_bind("0.0.0.0", ts)  # a token exists: allowed (and then every request needs one)
    assert is_loopback("localhost") and is_loopback("127.0.0.2") and not is_loopback("example.com")


def test_token_commands(tmp_path, capsys):
    store = str(tmp_path)
    assert main(["token", "create", "--store", store, "--scope", "read", "--cameras", "front,yard"]) == 0
    out, err = capsys.readouterr()
    token = out.strip()
    assert token.startswith("vam_") and "shown once" in err
    tid = token.split("_")[1]
    assert main(["token", "list", "--store", store]) == 0
    listed = capsys.readouterr().out
    assert tid in listed and "front,yard" in listed and token not in listed
    assert main(["token", "revoke", "--store", store, tid]) == 0
    assert main(["token", "revoke", "--store", store, tid]) == 2
    assert "no token" in capsys.readouterr().err
    assert main(["token", "list", "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
