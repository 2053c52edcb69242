"""The tools' flags of ``ask`` and ``serve`` become the config's ``tools`` section (and a bad URL
is refused by the config, naming the field); without them the tools stay off."""
import pytest

from vam_engine.cli import build_parser
from vam_engine.cli.common import config_from_args
from vam_engine.errors import VamError


@pytest.mark.parametrize("cmd", [["ask", "who is that?"], ["serve"]])
def test_tool_flags_configure_the_tools(cmd):
    p = build_parser()
    args = p.parse_args(cmd + ["--store", "mem", "--web-search", "http://127.0.0.1:8888", "--web-search-kind", "json",
                               "--image-search", "https://img.example/search"])
    tools = config_from_args(args).tools
    assert (tools.web_search.url, tools.web_search.kind) == ("http://127.0.0.1:8888", "json")
    assert tools.image_search.url == "https://img.example/search" and tools.enabled
    only_web = config_from_args(p.parse_args(cmd + ["--store", "mem", "--web-search", "http://h:1"])).tools
    assert only_web.web_search.kind == "searxng" and only_web.image_search.url is None
    assert not config_from_args(p.parse_args(cmd + ["--store", "mem"])).tools.enabled
    with pytest.raises(VamError, match="tools.web_search.url must be an http"):
        config_from_args(p.parse_args(cmd + ["--store", "mem", "--web-search", "searx.local"]))
