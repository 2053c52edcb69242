"""Helpers shared by the tests (imported as ``support.<module>``; tests/ is on pytest's path).

No test module imports another test module: what two tests share lives here.

- ``scripted``: the one scripted model (``TagScript``: replies by request tag) and readers of a request;
- ``clips``: clips whose frames carry their index (``write_clip``, ``changing_clip``, ``read_code``);
- ``net``, ``waiting``: free loopback ports, a server that never answers; polling with a deadline;
- ``live``: the servers live cameras read from (RTSP through vam_engine.synthetic.rtsp, HTTP MPEG-TS, HLS, MJPEG);
- ``server``: a small served store, uvicorn in a thread, an SSE reader; ``browser``: headless Chromium;
- ``missing_extras``: a subprocess's environment in which named extras' modules do not import;
- ``monitors``, ``demo_store``, ``eval_sample_model``: scripted scenes and models of their tests;
- ``vectors``, ``tolerances``, ``gate_isas``, ``cascade_rules``, ``tiny_clip_model``,
  ``legacy_state``, ``paths``.
"""
