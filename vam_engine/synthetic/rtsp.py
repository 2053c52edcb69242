"""A clip served as a live RTSP camera, for the live tests and benchmarks/bench_live.py.

GStreamer's RTSP server (GstRtspServer through python3-gi) runs on the system Python, one
process per camera: it serves an H.264 MP4 clip at rtsp://127.0.0.1:PORT/cam, played in real
time from its start for each client, over RTP/TCP or UDP; a clip with an AAC audio track is
served with it as a second RTP stream (MPEG-4 generic, RFC 3640). ``rtsp_server_available()``
says why it cannot run here (None when it can).
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

SYSTEM_PYTHON = "/usr/bin/python3"

# Run by the system Python as ``-c SERVER PORT CLIP [MOUNT [AUDIO]]``: prints READY once it
# listens, serves until killed; AUDIO "1": the clip's first audio track (AAC) is served too.
SERVER = """
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer

port, clip = sys.argv[1], sys.argv[2]
mount = sys.argv[3] if len(sys.argv) > 3 else "/cam"
audio = len(sys.argv) > 4 and sys.argv[4] == "1"
Gst.init(None)
server = GstRtspServer.RTSPServer()
server.set_address("127.0.0.1")
server.set_service(port)
factory = GstRtspServer.RTSPMediaFactory()
if audio:
    factory.set_launch(f'( filesrc location="{clip}" ! qtdemux name=d d.video_0 ! queue ! h264parse ! rtph264pay '
                       f'name=pay0 pt=96 config-interval=1 d.audio_0 ! queue ! aacparse ! rtpmp4gpay name=pay1 pt=97 )')
else:
    factory.set_launch(f'( filesrc location="{clip}" ! qtdemux ! h264parse ! rtph264pay name=pay0 pt=96 '
                       f'config-interval=1 )')
server.get_mount_points().add_factory(mount, factory)
if server.attach(None) == 0:
    print(f"cannot listen on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    sys.exit(2)
print("READY", flush=True)
GLib.MainLoop().run()
"""


VIDEO_ELEMENTS = ("filesrc", "qtdemux", "h264parse", "rtph264pay")
AUDIO_ELEMENTS = ("queue", "aacparse", "rtpmp4gpay")  # an AAC track beside the video


def clip_has_audio(clip) -> bool:
    import av

    with av.open(str(clip)) as c:
        return bool(c.streams.audio)


def rtsp_server_available(audio: bool = False) -> str | None:
    """None when the system Python can run the server (``audio``: with an AAC track), else why not."""
    if not os.path.exists(SYSTEM_PYTHON):
        return f"{SYSTEM_PYTHON} not found"
    names = VIDEO_ELEMENTS + (AUDIO_ELEMENTS if audio else ())
    probe = ("import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0'); "
             "from gi.repository import Gst, GstRtspServer; Gst.init(None); "
             f"missing = [n for n in {names!r} "
             "if Gst.ElementFactory.find(n) is None]; print(' '.join(missing))")
    try:
        out = subprocess.run([SYSTEM_PYTHON, "-c", probe], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the system Python cannot probe GStreamer: {e}"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["unknown error"])[-1]
        return ("GStreamer's RTSP server is not importable by the system Python (apt-get install "
                f"gir1.2-gst-rtsp-server-1.0 python3-gi gstreamer1.0-plugins-good gstreamer1.0-plugins-bad): {last}")
    if out.stdout.strip():
        return (f"GStreamer elements missing: {out.stdout.strip()} (apt-get install gstreamer1.0-plugins-good "
                f"gstreamer1.0-plugins-bad)")
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RtspServer:
    """The server as a separate process serving ``clip`` at rtsp://127.0.0.1:port/cam (with its
    audio track when it has one); ``start()`` again after ``kill()`` restarts it on the same
    port (a camera coming back)."""

    def __init__(self, clip: Path, port: int | None = None):
        self.clip = Path(clip)
        self.port = port or _free_port()
        self.audio = clip_has_audio(self.clip)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"rtsp://127.0.0.1:{self.port}/cam"

    def start(self, timeout: float = 15.0) -> "RtspServer":
        self.proc = subprocess.Popen([SYSTEM_PYTHON, "-c", SERVER, str(self.port), str(self.clip), "/cam",
                                      "1" if self.audio else "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + timeout
        line = ""
        while time.monotonic() < deadline:  # READY once it listens; a port still held makes it exit
            line = self.proc.stdout.readline()
            if line.strip() == "READY" or self.proc.poll() is not None:
                break
        if line.strip() != "READY":
            err = self.proc.stderr.read() if self.proc.poll() is not None else "(still starting)"
            self.kill()
            raise RuntimeError(f"the RTSP server did not start on port {self.port}: {err}")
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.kill()
