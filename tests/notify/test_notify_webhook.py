"""Webhooks against a loopback HTTP receiver: a fired standing request's alert is POSTed at once
and its model-written reply follows as a second message naming the alert, each body signed
with HMAC-SHA256 under the secret (checked here with hmac itself); a 5xx is tried again with
backoff and delivered once under the same delivery id; a dead receiver makes a dead letter
after its tries, counted in the service's /metrics; a 4xx is one at once; a full queue drops
new events (counted) and never blocks the caller; camera states go out too; neither the secret
nor the endpoint's path is ever logged or shown."""
import hashlib
import hmac
import json
import logging
import threading
import time

import pytest

from support.monitors import judge
from support.net import free_port
from support.sessions import CFG, push, session_model
from support.waiting import wait_for
from support.webhook_receiver import Receiver
from vam_engine.config import EngineConfig
from vam_engine.engine import Engine
from vam_engine.errors import VamError
from vam_engine.llm import ScriptedLLM
from vam_engine.memory import Alert
from vam_engine.notify import SIGNATURE_HEADER, Notifier, WebhookSink, alert_event, make_notifier, verify

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 120
SECRET = "s3cret-TOPSECRET"


@pytest.fixture
def receiver():
    made = []

    def make(**kw):
        made.append(Receiver(**kw))
        return made[-1]
    yield make
    for r in made:
        r.close()


def hooks_cfg(*urls, **kw) -> dict:
    return {**CFG, "webhooks": {"urls": list(urls), "secret": SECRET, "backoff_s": 0.01, "backoff_max_s": 0.05,
                                "state_poll_s": 0.1, **kw}}


def an_alert(alert_id: int = 1) -> Alert:
    return Alert(alert_id, "mon_1", "cam", 3.0, None, 0.9, "a red square", (7,), ("/store/alerts/x.jpg",), time.time())


def signed_by_secret(r) -> bool:
    """The receiver's own check: HMAC-SHA256 of the raw body under the shared secret."""
    want = "sha256=" + hmac.new(SECRET.encode(), r.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, r.headers["x-vam-signature"])


def test_the_alert_goes_out_at_once_signed_and_its_reply_follows_naming_it(tmp_path, receiver):
    r = receiver()
    with Engine(tmp_path / "s", hooks_cfg(r.url), device="cpu", llm=ScriptedLLM(session_model())) as eng:
        notifier = make_notifier(eng, eng.config).start()
        try:
            push(eng, "cam", 0.0, 1.0)
            eng.turn("Tell me when a red square appears.", session="alice")
            push(eng, "cam", 1.0, 10.0, red_from=7.0)
            (alert,) = eng.alerts()
            wait_for("alert and reply", lambda: len(r.received) >= 2, 10)
            reply_turn = eng.session("alice").turns[-1]
        finally:
            notifier.close(2)
    first, second = r.received[:2]
    assert all(signed_by_secret(x) and verify(x.body, x.headers[SIGNATURE_HEADER.lower()], SECRET.encode())
               for x in (first, second))
    assert not verify(first.body + b" ", first.headers["x-vam-signature"], SECRET.encode())  # a changed body fails
    assert not verify(first.body, first.headers["x-vam-signature"], b"another secret")
    a, rep = json.loads(first.body), json.loads(second.body)
    assert first.path == "/hook" and first.headers["content-type"] == "application/json"
    assert first.headers["x-vam-event"] == "alert" and first.headers["x-vam-delivery"] == a["event_id"]
    assert a["event_type"] == "alert" and a["alert_id"] == alert.alert_id and a["condition"] == "a red square appears"
    assert second.headers["x-vam-event"] == "reply" and rep["event_type"] == "reply"
    assert rep["alert_id"] == alert.alert_id and rep["text"] == reply_turn.text and rep["camera_id"] == "cam"
    assert len(r.received) == 2  # a pushed camera has no live state to tell


def test_a_5xx_is_tried_again_and_delivered_once_under_the_same_delivery_id(receiver):
    r = receiver(statuses=[500, 503])
    sink = WebhookSink(r.url, SECRET.encode(), backoff_s=0.01, max_attempts=5)
    sink.start()
    try:
        assert sink.offer(alert_event(an_alert()))
        wait_for("delivered", lambda: sink.stats().sent == 1, 10)
    finally:
        sink.close(2)
    assert len(r.received) == 3 and len({x.headers["x-vam-delivery"] for x in r.received}) == 1
    assert all(signed_by_secret(x) for x in r.received)
    st = sink.stats()
    assert (st.sent, st.retries, st.dead_letters, st.dropped) == (1, 2, 0, 0)


def test_a_dead_receiver_makes_a_dead_letter_counted_in_metrics(tmp_path, caplog):
    from fastapi.testclient import TestClient

    from vam_engine.server import ServeOptions, create_app

    caplog.set_level(logging.DEBUG, logger="vam_engine")
    dead = f"http://127.0.0.1:{free_port()}/hooks/T0KEN-in-the-path"
    cfg = EngineConfig.load(webhooks={"urls": [dead], "secret": SECRET, "max_attempts": 3, "backoff_s": 0.01})
    with Engine(tmp_path / "s", CFG, device="cpu") as eng:
        notifier = make_notifier(eng, cfg).start()
        try:
            notifier.emit(alert_event(an_alert()))
            sink = notifier.sinks[0]
            wait_for("a dead letter", lambda: sink.stats().dead_letters == 1, 10)
            assert (sink.stats().retries, sink.stats().sent) == (2, 0)
            app = create_app(eng, ServeOptions(tokens_dir=str(tmp_path / "tokens"),
                                               metric_sources=(notifier.metric_lines,)))
            with TestClient(app, base_url="http://127.0.0.1:8000") as c:
                text = c.get("/metrics").text
        finally:
            notifier.close(2)
    assert 'vam_notify_dead_letters_total{sink="webhook-0"} 1' in text.splitlines()
    assert 'vam_notify_retries_total{sink="webhook-0"} 2' in text.splitlines()
    assert "dead letter after 3 tries" in caplog.text and "webhook 0 (127.0.0.1)" in caplog.text
    for secret in (SECRET, "T0KEN-in-the-path"):
        assert secret not in caplog.text and secret not in text


def test_a_4xx_is_a_dead_letter_at_once(receiver):
    r = receiver(statuses=[404])
    sink = WebhookSink(r.url, SECRET.encode(), backoff_s=0.01, max_attempts=5)
    sink.start()
    try:
        sink.offer(alert_event(an_alert()))
        wait_for("a dead letter", lambda: sink.stats().dead_letters == 1, 10)
    finally:
        sink.close(2)
    assert len(r.received) == 1 and sink.stats().retries == 0


def test_a_full_queue_drops_new_events_without_waiting(receiver):
    hold = threading.Event()
    r = receiver(hold=hold)
    sink = WebhookSink(r.url, SECRET.encode(), queue_max=2, timeout_s=30)
    sink.start()
    try:
        assert sink.offer(alert_event(an_alert(1)))
        wait_for("the first taken (the receiver holds it)", lambda: sink.stats().queued == 0, 5)
        t0 = time.monotonic()
        offered = [sink.offer(alert_event(an_alert(k))) for k in range(2, 6)]
        assert time.monotonic() - t0 < 0.5  # nobody waited for the held receiver
        assert offered == [True, True, False, False] and sink.stats().dropped == 2
        hold.set()
        wait_for("the rest delivered", lambda: sink.stats().sent == 3, 10)
    finally:
        sink.close(2)
    assert [json.loads(x.body)["alert_id"] for x in r.received] == [1, 2, 3]


def test_camera_states_are_posted_as_they_change(tmp_path, receiver):
    r = receiver()
    with Engine(tmp_path / "s", hooks_cfg(r.url), device="cpu", llm=ScriptedLLM(judge())) as eng:
        notifier = make_notifier(eng, eng.config).start()
        try:
            eng.add_camera("gone", f"http://127.0.0.1:{free_port()}/live.ts", max_retries=2, backoff_s=0.5,
                           backoff_max_s=0.5)
            wait_for("offline", lambda: any(json.loads(x.body).get("state") == "offline" for x in r.received), 10)
            eng.remove_camera("gone")
            wait_for("removed", lambda: json.loads(r.received[-1].body).get("state") == "removed", 10)
        finally:
            notifier.close(2)
    bodies = [json.loads(x.body) for x in r.received]
    assert all(x.headers["x-vam-event"] == "state" and signed_by_secret(x) for x in r.received)
    assert [b["state"] for b in bodies][0] == "connecting" and bodies[-2]["state"] == "offline"
    assert {b["camera_id"] for b in bodies} == {"gone"} and bodies[-2]["reconnects"] == 2


def test_webhooks_need_a_secret_and_a_url_that_is_http(tmp_path):
    with pytest.raises(VamError, match="without webhooks.secret"):
        EngineConfig.load(webhooks={"urls": ["http://127.0.0.1:9/x"]})
    with pytest.raises(VamError, match=r"webhooks.urls\[1\] must be an http") as e:
        EngineConfig.load(webhooks={"urls": ["http://h/x", "file:///etc/TOPSECRET"], "secret": SECRET})
    assert "TOPSECRET" not in str(e.value)
    cfg = EngineConfig.load(env={"VAM_WEBHOOKS__URLS": "http://a/x, https://b/y", "VAM_WEBHOOKS__SECRET": SECRET})
    assert cfg.webhooks.urls == ["http://a/x", "https://b/y"] and SECRET not in repr(cfg) and "/x" not in repr(cfg)
    with Engine(tmp_path / "s", CFG, device="cpu") as eng:
        assert make_notifier(eng, EngineConfig()) is None  # neither set: no notifier
        n = Notifier(eng, [])
        assert "vam_notify_inbox_dropped_total 0" in n.metric_lines()


def test_https_checks_the_receivers_certificate(tmp_path, receiver):
    from support.broker import tls_files

    ca, cert, key = tls_files(tmp_path / "tls")
    r = receiver(tls=(cert, key))
    sink = WebhookSink(r.url, SECRET.encode(), backoff_s=0.01, max_attempts=2)  # the system's CAs: not the test CA
    sink.start()
    try:
        sink.offer(alert_event(an_alert()))
        wait_for("a dead letter", lambda: sink.stats().dead_letters == 1, 10)
    finally:
        sink.close(2)
    assert r.received == [] and sink.stats().sent == 0
