"""The one device resolver, and decoder options a body cannot honour: clear errors, not silence."""
import pytest

from support.clips import write_clip
from vam_engine.device import DeviceError, cuda_available, resolve_device
from vam_engine.errors import VamError
from vam_engine.ingest import PyAVDecoder, decoder_options, open_decoder


def test_resolve_device():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == resolve_device(None) == ("cuda" if cuda_available() else "cpu")
    for bad in ("tpu", "cuda:x", "", 3):
        with pytest.raises(DeviceError, match="device must be one of auto, cpu, cuda") as e:
            resolve_device(bad)
        assert repr(bad) in str(e.value)
    if not cuda_available():
        with pytest.raises(DeviceError, match=r"CUDA is not available.*--device cpu"):
            resolve_device("cuda")
        with pytest.raises(DeviceError, match="'cuda:1'"):
            resolve_device("cuda:1")
    else:
        assert resolve_device("cuda") == "cuda"


def test_every_body_resolves_through_it():
    from vam_engine.gate.bodies import make_body

    assert make_body("cpu").name == "cpu"
    with pytest.raises(DeviceError, match="'gpu'"):
        make_body("gpu")
    if not cuda_available():
        with pytest.raises(DeviceError, match="CUDA is not available"):
            make_body("cuda")


def test_a_decoder_option_the_body_cannot_honour_is_refused(tmp_path):
    clip = tmp_path / "a.mp4"
    write_clip(clip, [0, 100, 200, 300])
    # the decoder's-choice values are not options asked for: every body honours them
    assert decoder_options(PyAVDecoder, {"fps": 1.0, "skip_nonref": None, "threads": 0}) == {
        "fps": 1.0, "skip_nonref": None, "threads": 0}
    with pytest.raises(VamError, match=r"the pyav decoder does not support bogus=1"):
        open_decoder(str(clip), "c", device="cpu", fps=1.0, bogus=1)
    # GPU decoders decode every frame: PyAV's skipping and thread options cannot apply
    for opt, value, field in [("skip_nonref", True, "skip_nonref"), ("skip_gops", False, "skip_gops"),
                              ("threads", 4, "decode_threads")]:
        with pytest.raises(VamError, match=rf"the nvdec decoder does not support {opt}={value!r}.*"
                                           rf"ingest\.{field}.*--device cpu"):
            open_decoder(str(clip), "c", device="cuda", fps=1.0, **{opt: value})
    with PyAVDecoder(str(clip), "c", **decoder_options(PyAVDecoder, {"fps": 10.0, "threads": 2})) as dec:
        assert len(list(dec)) == 4


def test_a_sections_device_overrides_the_engines_by_one_rule():
    from vam_engine.device import section_device

    assert section_device("cpu", "cuda:1") == "cpu"  # the section names one: its own
    assert section_device("cuda:2", "cpu") == "cuda:2"
    assert section_device("auto", "cuda:1") == "cuda:1"  # "auto" (or unset): the engine's
    assert section_device(None, "cpu") == "cpu"
    assert section_device("auto", None) == "auto"  # nothing decided: left to the body's resolver


def test_the_audio_section_follows_the_rule(monkeypatch):
    import vam_engine.audio.asr as asr
    import vam_engine.audio.isolated as isolated
    from vam_engine.config import AudioConfig

    seen = []
    monkeypatch.setattr(isolated, "IsolatedRecognizer", lambda options: seen.append(options["device"]))
    asr.make_recognizer(AudioConfig(model="m", device="cpu"), "cuda:3")
    asr.make_recognizer(AudioConfig(model="m"), "cuda:3")
    assert seen == ["cpu", "cuda:3"]


def test_cuda_index_reads_a_resolved_cuda_device_only():
    from vam_engine.device import cuda_index

    assert cuda_index("cuda") == 0 and cuda_index("cuda:3") == 3
    for bad in ("cpu", "auto", "cuda:x", None):
        with pytest.raises(DeviceError, match=r"a CUDA device \('cuda' or 'cuda:N'\) is needed here"):
            cuda_index(bad)


def test_open_decoder_hands_its_device_decision_to_the_gpu_body(tmp_path, monkeypatch):
    import vam_engine.ingest.nvdec_decoder as nvdec

    got = {}

    class Recording:  # stands in for NVDEC: what open_decoder passes it is the point
        name, options = "nvdec", frozenset()

        def __init__(self, path, camera_id, **kw):
            got.update(kw, path=path)

    monkeypatch.setattr(nvdec, "NvdecDecoder", Recording)
    open_decoder("rtsp://cam.invalid/s", "c", device="cuda:1", fps=2.0)
    assert got == {"path": "rtsp://cam.invalid/s", "device": "cuda:1", "fps": 2.0}


@pytest.mark.parametrize("body", ["nvdec", "dali"])
def test_a_gpu_decoder_given_no_cuda_device_names_its_device(body, tmp_path):
    import importlib

    cls = {"nvdec": "NvdecDecoder", "dali": "DaliDecoder"}[body]
    decoder = getattr(importlib.import_module(f"vam_engine.ingest.{body}_decoder"), cls)
    with pytest.raises(ValueError, match=rf"^the {body} decoder's device: a CUDA device .* got 'cpu'"):
        decoder(str(tmp_path / "a.mp4"), "c", device="cpu")
