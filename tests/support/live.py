"""What the live tests share: a camera's status, the frame numbers its moments show, and the
servers they read from (the RTSP server process of vam_engine.synthetic.rtsp; HTTP MPEG-TS, HLS
and MJPEG servers in a thread)."""
from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path

import numpy as np
from PIL import Image

from support.clips import read_code
from vam_engine.synthetic.rtsp import RtspServer, rtsp_server_available  # noqa: F401 (the live tests' RTSP server)


def status_of(eng, cam: str):
    return eng.status(cam)[0]


def codes(moments) -> list[int]:
    """The frame index each moment's JPEG shows (the clip's own frame numbering)."""
    return [read_code(np.asarray(Image.open(m.frame_path))) for m in moments]


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
