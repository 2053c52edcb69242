"""What the live tests share: a camera's status, the frame numbers its moments show, and the
servers they read from (an RTSP server process, HTTP MPEG-TS, HLS and MJPEG servers in a thread)."""
from __future__ import annotations

import http.server
import os
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
from PIL import Image

from support.clips import read_code
from support.net import free_port

HERE = Path(__file__).resolve().parent
SYSTEM_PYTHON = "/usr/bin/python3"


def status_of(eng, cam: str):
    return eng.status(cam)[0]


def codes(moments) -> list[int]:
    """The frame index each moment's JPEG shows (the clip's own frame numbering)."""
    return [read_code(np.asarray(Image.open(m.frame_path))) for m in moments]


def rtsp_server_available() -> str | None:
    """None when the system Python can run tests/support/rtsp_server.py, else why not."""
    if not os.path.exists(SYSTEM_PYTHON):
        return f"{SYSTEM_PYTHON} not found"
    probe = ("import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0'); "
             "from gi.repository import Gst, GstRtspServer; Gst.init(None); "
             "missing = [n for n in ('filesrc', 'qtdemux', 'h264parse', 'rtph264pay') "
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
        return f"GStreamer elements missing: {out.stdout.strip()} (apt-get install gstreamer1.0-plugins-good " \
               f"gstreamer1.0-plugins-bad)"
    return None


class RtspServer:
    """tests/support/rtsp_server.py as a separate process serving ``clip`` at rtsp://127.0.0.1:port/cam."""

    def __init__(self, clip: Path, port: int | None = None):
        self.clip = Path(clip)
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"rtsp://127.0.0.1:{self.port}/cam"

    def start(self, timeout: float = 15.0) -> "RtspServer":
        self.proc = subprocess.Popen([SYSTEM_PYTHON, str(HERE / "rtsp_server.py"), str(self.port), str(self.clip)],
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


def hls_from(clip: Path, out_dir: Path) -> Path:
    """Remux an H.264 clip into a VOD HLS playlist of 1 s MPEG-TS segments; returns the playlist."""
    import av

    out_dir.mkdir(parents=True, exist_ok=True)
    playlist = out_dir / "live.m3u8"
    with av.open(str(clip)) as src, av.open(str(playlist), "w", format="hls",
                                            options={"hls_time": "1", "hls_playlist_type": "vod"}) as out:
        ins = src.streams.video[0]
        outs = out.add_stream_from_template(ins)
        for p in src.demux(ins):
            if p.dts is not None:
                p.stream = outs
                out.mux(p)
    return playlist


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _QuietHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass


class HttpServer:
    """A loopback HTTP server in a thread: static files of ``directory``, or ``handler``."""

    def __init__(self, directory: Path | None = None, handler=None):
        import functools

        h = handler or functools.partial(_Quiet, directory=str(directory))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class TsServer(HttpServer):
    """An HTTP server on loopback sending an MPEG-TS file as one response per connection,
    as fast as the client reads it. ``hold_after``: a fraction of the file after which the
    first connection stops sending but stays open (a stalled camera); later ones send it all."""

    def __init__(self, ts_path: Path, hold_after: float | None = None):
        data = Path(ts_path).read_bytes()
        self.connections = 0
        self.release = threading.Event()
        server = self

        class Handler(_QuietHandler):
            def do_GET(self):  # noqa: N802 - the http.server API
                server.connections += 1
                first = server.connections == 1
                self.send_response(200)
                self.send_header("Content-Type", "video/mp2t")
                self.end_headers()
                cut = len(data) if hold_after is None or not first else int(len(data) * hold_after) // 188 * 188
                try:
                    for k in range(0, cut, 188 * 64):
                        self.wfile.write(data[k:min(cut, k + 188 * 64)])
                    self.wfile.flush()
                    if cut < len(data):
                        server.release.wait(30)  # the connection stays open, silent
                except (BrokenPipeError, ConnectionResetError):
                    pass

        super().__init__(handler=Handler)
        self.url = f"{self.base}/live.ts"

    def __exit__(self, *exc):
        self.release.set()
        super().__exit__(*exc)


def mjpeg_handler(frames: list[np.ndarray], fps: float):
    """A multipart/x-mixed-replace MJPEG camera sending ``frames`` at ``fps``, as IP cameras do."""
    import io

    jpegs = []
    for f in frames:
        b = io.BytesIO()
        Image.fromarray(f).save(b, "JPEG", quality=90)
        jpegs.append(b.getvalue())

    class Handler(_QuietHandler):
        def do_GET(self):  # noqa: N802 - the http.server API
            self.send_response(200)
            self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=frame")
            self.end_headers()
            t0 = time.monotonic()
            for k, d in enumerate(jpegs):
                time.sleep(max(0.0, t0 + k / fps - time.monotonic()))
                try:
                    self.wfile.write(b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n%s\r\n"
                                     % (len(d), d))
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return

    return Handler
