"""vam_engine/config/: one typed tree, one module per section named as its key, everything
reachable through the face; loading reads as it did when it was one module."""
import importlib

import pytest

import vam_engine.config as face
from vam_engine.config import EngineConfig
from vam_engine.errors import VamError


def _sections():
    return [(name, f.annotation) for name, f in EngineConfig.model_fields.items() if name != "device"]


def test_each_section_lives_in_the_module_named_as_its_key_and_the_face_exports_it():
    sections = _sections()
    assert len(sections) == 20
    for key, cls in sections:
        assert cls.__module__ == f"vam_engine.config.{key}", (key, cls.__module__)
        assert getattr(face, cls.__name__) is cls and cls.__name__ in face.__all__
        assert issubclass(cls, face.Section)  # unknown keys are errors in every section
    tools = importlib.import_module("vam_engine.config.tools")
    assert face.WebSearchConfig is tools.WebSearchConfig and face.ImageSearchConfig is tools.ImageSearchConfig


def test_every_name_of_the_face_is_bound():
    for name in face.__all__:
        assert getattr(face, name) is not None, name


def test_loading_overrides_in_order_and_names_a_bad_key(tmp_path):
    path = tmp_path / "engine.toml"
    path.write_text('[gate]\nssim_max = 0.9\n[ingest]\nfps = 2.0\n')
    cfg = EngineConfig.load(path, env={"VAM_GATE__SSIM_MAX": "0.95", "HOME": "/x"}, ingest={"fps": 3.0})
    assert (cfg.gate.ssim_max, cfg.ingest.fps) == (0.95, 3.0)  # the file, then the environment, then code
    with pytest.raises(VamError, match=r"(?s)invalid config.*gate\.nope"):
        EngineConfig.load(env={"VAM_GATE__NOPE": "1"})
    with pytest.raises(VamError) as e:  # a secret section's error never echoes what was given
        EngineConfig.load(mqtt={"url": "mqtt://u:hunter2@h", "qos": 9})
    assert "hunter2" not in str(e.value) and "mqtt.qos" in str(e.value)
