"""The manual stays true: the configuration reference equals its generator's output, the MkDocs
site builds with every link and anchor resolved, README's links resolve and .ci/run runs
README's test command."""
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _gen_config():
    spec = importlib.util.spec_from_file_location("gen_config", ROOT / "docs" / "gen_config.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_configuration_reference_is_the_generators_output():
    gen = _gen_config()
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == gen.reference(), "docs/configuration.md is out of date: run python docs/gen_config.py"


def test_the_reference_names_every_section_and_key_of_the_config_tree():
    from vam_engine.config import EngineConfig

    text = (ROOT / "docs" / "configuration.md").read_text()

    def walk(model, path):
        for name, f in model.model_fields.items():
            if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
                assert f"## `{path}{name}`" in text
                walk(f.annotation, f"{path}{name}.")
            else:
                assert f"| `{name}` |" in text, f"{path}{name}"

    walk(EngineConfig, "")


def test_a_section_renders_types_bounds_and_defaults_and_an_undocumented_key_is_refused():
    gen = _gen_config()

    class Demo(BaseModel):
        """A demo section."""

        rate: float = Field(0.5, gt=0, le=30, description="how often")
        side: int = Field(32, ge=2, multiple_of=2, description="a side")
        mode: Literal["a", "b"] = Field("a", description="which")
        url: str | None = Field(None, description="where")
        roles: dict[str, str] = Field(default_factory=dict, description="a | b")

    lines = gen.section_markdown("demo", Demo)
    assert lines[0] == "## `demo`" and "`Demo`: A demo section." in lines
    assert "| `rate` | float, (0, 30] | `0.5` | how often |" in lines
    assert "| `side` | int, >= 2, multiple of 2 | `32` | a side |" in lines
    assert '| `mode` | "a" or "b" | `"a"` | which |' in lines
    assert "| `url` | str or null | `null` | where |" in lines
    assert "| `roles` | table of str -> str | `{}` | a \\| b |" in lines

    class Undocumented(BaseModel):
        """Has a key without a description."""

        n: int = 3

    with pytest.raises(SystemExit, match="undocumented.n has no description"):
        gen.section_markdown("undocumented", Undocumented)


def _mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=root, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed (the docs extra)")
def test_the_site_builds_strict_and_a_broken_link_fails_it(tmp_path):
    done = _mkdocs_build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "configuration" / "index.html").exists()
    assert (tmp_path / "site" / "design" / "index.html").exists()
    # the same site with one broken link and one broken anchor does not build
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    with open(copy / "docs" / "tools.md", "a") as f:
        f.write("\n[gone](no-such-page.md), [no anchor](design.md#no-such-section)\n")
    broken = _mkdocs_build(copy, tmp_path / "broken")
    assert broken.returncode != 0
    assert "no-such-page.md" in broken.stderr and "no-such-section" in broken.stderr


def test_readmes_links_resolve():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == []


def test_ci_runs_readmes_test_command():
    command = next(line for line in README.splitlines() if "python -m pytest" in line and "pip install" in line)
    steps = [s.strip() for s in command.split("&&")]
    ci = (ROOT / ".ci" / "run").read_text()
    ci_lines = [line.strip() for line in ci.splitlines()]
    for step in steps:
        if step.startswith(("python3 -m venv", ". ")):
            continue  # .ci/run makes its own venv
        assert any(line == step or line.endswith(" " + step) for line in ci_lines), step
