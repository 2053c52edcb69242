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
