"""A tiny RTSP server for the live tests, run with the system Python (GStreamer's
GstRtspServer through python3-gi): ``/usr/bin/python3 rtsp_server.py PORT CLIP [MOUNT]``.

It serves an H.264 MP4 clip at rtsp://127.0.0.1:PORT/MOUNT (default /cam), played in real time
from its start for each client, over RTP/TCP or UDP; prints READY once it listens and runs
until killed."""
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def main() -> None:
    port, clip = sys.argv[1], sys.argv[2]
    mount = sys.argv[3] if len(sys.argv) > 3 else "/cam"
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(port)
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(f'( filesrc location="{clip}" ! qtdemux ! h264parse ! rtph264pay name=pay0 pt=96 '
                       f'config-interval=1 )')
    server.get_mount_points().add_factory(mount, factory)
    if server.attach(None) == 0:
        print(f"cannot listen on 127.0.0.1:{port}", file=sys.stderr, flush=True)
        sys.exit(2)
    print("READY", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
