"""A real MQTT broker for the notify tests: Debian's ``mosquitto`` on a loopback port (started
and stopped by the test, on the same port again for a restart), with an optional password file
or TLS listener; and ``Listener``, a paho client that records every message it receives."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from support.net import free_port
from support.waiting import wait_for

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def missing_broker() -> str | None:
    return None if Path(MOSQUITTO).is_file() else "no mosquitto broker (apt-get install mosquitto)"


class Broker:
    """``mosquitto -c`` with one listener on 127.0.0.1:``port``; ``users``: {name: password}
    makes it refuse anonymous clients; ``tls``: (cert, key) for an mqtts listener; ``persistent``:
    a restart keeps retained messages, subscriptions of clients without a clean session, and
    what was queued for them."""

    def __init__(self, workdir: Path, *, users: dict | None = None, tls: tuple | None = None,
                 persistent: bool = False):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        lines = [f"listener {self.port} 127.0.0.1"]
        lines += ["persistence true", f"persistence_location {self.dir}/"] if persistent else ["persistence false"]
        if os.geteuid() == 0:  # started as root mosquitto becomes user "mosquitto", who cannot read the test's files
            lines.append("user root")
        if users:
            pw = self.dir / "passwords"
            pw.write_text("")
            for name, password in users.items():
                subprocess.run(["mosquitto_passwd", "-b", str(pw), name, password], check=True, capture_output=True)
            pw.chmod(0o600)
            lines += ["allow_anonymous false", f"password_file {pw}"]
        else:
            lines += ["allow_anonymous true"]
        if tls:
            lines += [f"certfile {tls[0]}", f"keyfile {tls[1]}"]
        self.conf = self.dir / "mosquitto.conf"
        self.conf.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Broker":
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=open(self.dir / "mosquitto.log", "ab"))
        wait_for("mosquitto to listen", self._listening, 10)
        return self

    def _listening(self) -> bool:
        import socket

        if self.proc.poll() is not None:
            raise AssertionError(f"mosquitto exited: {(self.dir / 'mosquitto.log').read_text()[-2000:]}")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None


@dataclass(frozen=True)
class Message:
    topic: str
    payload: bytes
    retain: bool
    at: float

    def json(self):
        return json.loads(self.payload)


class Listener:
    """A paho client subscribed to ``topic`` (again after each reconnect) keeping every message."""

    def __init__(self, port: int, topic: str = "#", *, username=None, password=None, tls_ca=None,
                 session: str | None = None):
        """``session``: a client id whose session the broker keeps (no clean session): with a
        persistent broker, what is published while this client is away reaches it on return."""
        import paho.mqtt.client as mqtt

        self.messages: list[Message] = []
        self._lock = threading.Lock()
        self.topic = topic
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=session or f"test-{time.monotonic_ns()}",
                                  clean_session=session is None)
        if username:
            self.client.username_pw_set(username, password)
        if tls_ca:
            self.client.tls_set(ca_certs=tls_ca)
        self.client.reconnect_delay_set(1, 1)
        self.subscribed = threading.Event()
        self.client.on_connect = lambda c, u, f, rc, p=None: c.subscribe(topic, qos=1)
        self.client.on_subscribe = lambda *a: self.subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect_async("127.0.0.1", port, keepalive=10)
        self.client.loop_start()
        assert self.subscribed.wait(10), "the test listener did not subscribe"

    def _on_message(self, client, userdata, msg) -> None:
        with self._lock:
            self.messages.append(Message(msg.topic, bytes(msg.payload), bool(msg.retain), time.monotonic()))

    def on(self, topic: str) -> list[Message]:
        with self._lock:
            return [m for m in self.messages if m.topic == topic]

    def wait(self, what: str, topic: str, pred=lambda m: True, timeout: float = 20) -> Message:
        return wait_for(what, lambda: next((m for m in self.on(topic) if pred(m)), None), timeout)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def tls_files(workdir: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it (openssl):
    (ca.pem, server.pem, server.key)."""
    d = Path(workdir)
    d.mkdir(parents=True, exist_ok=True)
    ca, ca_key, cert, key, csr = (d / n for n in ("ca.pem", "ca.key", "server.pem", "server.key", "server.csr"))
    ext = d / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "1",
        "-subj", "/CN=vam test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-out", str(cert),
        "-days", "1", "-extfile", str(ext))
    return ca, cert, key
