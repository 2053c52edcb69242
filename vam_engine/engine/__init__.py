"""The engine: the public API (``Engine``, core.py) composed of parts that each receive what they
use, never the engine:

- ``EngineModels`` (models.py): the MLLM, the document text embedder and the event forest,
  built at first use;
- ``Lifecycle`` (lifecycle.py): the writer lock, the vector indexes, the document writer,
  background retention and the indexing pipeline;
- ``PushedCameras`` (pushed.py), ``LiveCameras`` (live.py), ``index_sources`` (files.py): the
  three ways video comes in;
- ``EngineMonitors`` (monitors.py): watch, alerts;
- ``Answering`` (reason/ask.py, with the session policy of reason/sessions.py): the one body of
  ``ask`` and ``turn``, sessions and replies to alerts, given ``EngineViews`` (views.py: what a
  question reads, its causal view and the present), the models, the tools and the session store;
- ``Documents`` (documents.py): summaries and the forest after a deletion;
- ``EngineClips`` (clips.py): MP4 clips of any interval, cut from the source file or built from
  the retained frames;
- ``EngineAudio`` (audio.py): speech transcribed beside the video (files, live cameras, pushed
  audio) when ``audio.model`` is set; its hub is built at the first call that needs it;
- ``EnginePerception`` and ``PerceptionReads`` (perception.py): the detector and OCR on kept
  frames when ``perception.enabled`` (loaded at construction: a model that cannot run fails
  then), and the entities, timelines and last-seen reads.

What starts when (one rule, so that reading a store never changes it):

=========================================  ===========  ===============  =========
call                                       writer lock  document writer  retention
=========================================  ===========  ===============  =========
construction, search, moments, info, ask   no           no               no
index_file(s), push, push_audio,          yes          yes (with LLM)   yes (when enabled)
add_camera, start
summarize, wait_for_documents              yes          yes              no
delete, retain                             yes          no               retain: one pass
=========================================  ===========  ===============  =========

The writer lock (memory/writer_lock.py) makes one process the store's writer; readers take no
lock and keep working meanwhile. ``ask`` records every answer in the QA history (one row at
once; its embedding and the rolling summary's rewrite by a background thread that ``close``
waits for), and writes summary documents only when its planner asks for them (taking the
writer lock then). The LLM is built at its first use (``ask``, a monitor or the document
writer), never at construction.

``retain_store`` runs retention without an engine; ``StoreFollower`` feeds the present from a
store another process indexes. Imports run downward: the engine uses reason/, index/, memory/
and the layers below, never the service, the cluster or the CLI above it.
"""
from ..ingest import ClipBusy, ClipError, NoClip
from .clips import Clip
from .core import Engine
from .lifecycle import retain_store
from .monitors import StoreFollower

__all__ = ["Engine", "retain_store", "StoreFollower", "Clip", "ClipBusy", "ClipError", "NoClip"]
