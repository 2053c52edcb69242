"""Perception on the command line: ``--detector`` / ``--labels`` / ``--ocr`` on the commands that
index or serve, ``vam-engine entities`` (table, JSON, last seen), ``search --label`` and a missing
detector as a one-line error. The demo's text and object searches: tests/cli/test_demo.py."""
import json

from support import perception_store as ps
from vam_engine.cli import build_parser, main


def _help(cmd: str) -> str:
    return build_parser()._subparsers._group_actions[0].choices[cmd].format_help()


def test_perception_options_go_to_the_commands_that_index_or_serve():
    for cmd in ("index", "serve", "demo", "watch"):
        assert "--detector" in _help(cmd) and "--labels" in _help(cmd) and "--ocr" in _help(cmd), cmd
    for cmd in ("search", "ask", "info", "entities"):
        assert "--detector" not in _help(cmd), cmd
    assert "--label" in _help("search") and "--last-seen" in _help("entities")


def test_entities_and_search_by_label(perception_store, capsys):
    store = str(perception_store["store"])
    assert main(["entities", "--store", store, "--json"]) == 0
    ents = json.loads(capsys.readouterr().out)
    assert sorted(e["label"] for e in ents) == ["cat", "person"]
    assert main(["entities", "--store", store, "--label", "cat", "--camera", "yard"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 2 and table[1].split()[1] == "cat" and "gate, yard" not in table[1]
    assert main(["entities", "--store", store, "--last-seen", "cat"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("entity ") and "(cat) last seen on gate" in line and "box [" in line
    assert main(["search", "--store", store, ps.SIGN, "--label", "cat"]) == 0
    out = capsys.readouterr().out
    assert " ocr " in out and f"'{ps.SIGN}' at box [" in out
    assert main(["search", "--store", store, ps.SIGN, "--label", "person", "--top-k", "3"]) == 0
    assert "ocr" not in capsys.readouterr().out.split("frame", 1)[-1]  # the sign was never seen with a person


def test_a_missing_detector_is_a_one_line_error(tmp_path, capsys):
    rc = main(["index", str(tmp_path / "none.mp4"), "--store", str(tmp_path / "s"), "--detector",
               str(tmp_path / "model.pb"), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "perception.detector" in err and "model.pb does not exist" in err
