"""The reference site's generators (docs/sitegen/): python -m pytest tests/docs -q

No MkDocs needed: the generators are plain Python; `make docs` runs the full build.
"""

import argparse
import textwrap

import gymnasium
import pytest

from docs.sitegen import api_reference, build, cli_reference, env_catalogue, hooks
from turnkit.cli import build_parser


# ---------------------------------------------------------------------------------------------- CLI reference
def test_cli_reference_covers_every_subcommand_and_option():
    parser = build_parser()
    page = cli_reference.render(parser)
    commands = dict(cli_reference.subcommands(parser))
    assert "turnkit list" in commands and "turnkit synth" in commands
    for name, sub in commands.items():
        heading = f"\n{'#' * (2 + name.count(' '))} {name}\n"  # nested commands go one level deeper
        assert heading in page, name
        assert f"(#{'-'.join(name.split())})" in page, name  # the summary table links to the section
        section = page.split(heading, 1)[1]
        for action in sub._actions:
            if (
                isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
                or action.help == argparse.SUPPRESS
            ):
                continue
            spelling = action.option_strings[0] if action.option_strings else action.dest
            assert f"| `{spelling}" in section, (name, spelling)


def test_cli_reference_expands_defaults_and_escapes_pipes():
    parser = argparse.ArgumentParser(prog="tool")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run it")
    run.add_argument("--agent", default="oracle", help="oracle | random")
    run.add_argument("--seed", type=int, default=0)
    nested = run.add_subparsers(dest="what").add_parser("deep", help="a nested command")
    nested.add_argument("--flag", action="store_true", help="on (default: %(default)s)")
    page = cli_reference.render(parser)
    assert "| `--agent AGENT` | oracle \\| random (default: `oracle`) |" in page
    assert "| `--seed SEED` | (default: `0`) |" in page  # 0 is a default, not "no default"
    assert "#### tool run deep" in page and "| `--flag` | on (default: False) |" in page


# ---------------------------------------------------------------------------------------------- env catalogue
def test_env_catalogue_lists_every_registered_env():
    ids = env_catalogue.env_ids()
    registered = sorted(i for i in gymnasium.registry if i.startswith("turnkit/"))
    assert ids == registered and len(ids) >= 7
    index = env_catalogue.render_index(ids)
    for env_id in ids:
        assert f"[`{env_id}`]({env_id.split('/')[1]}.md)" in index
    assert len({env_catalogue.page_path(i) for i in ids}) == len(ids)


def test_env_page_shows_spaces_splits_rewards_and_a_seeded_oracle_episode():
    page = env_catalogue.render_env("turnkit/MathEpisodes-v0")
    assert "| Observation space | `TextSpace(" in page and "| Action space | `TextSpace(" in page
    assert "| Splits | `id`, `ood`, `combo` |" in page
    assert "## Rewards\n\n``1.0`` on the turn with a correct answer" in page
    traj = env_catalogue.example_episode("turnkit/MathEpisodes-v0")
    assert traj.success and traj.steps[-1].action.text in page
    assert page == env_catalogue.render_env("turnkit/MathEpisodes-v0")  # seeded: the page never churns


def test_env_page_falls_back_to_the_module_docstring():
    page = env_catalogue.render_env("turnkit/PhysicsPrediction-v0")  # its class docstring has no ## sections
    assert "## Rewards\n\nPer chunk" in page
    assert "`interp_train`" in page


def test_long_observations_are_cut_and_fences_outgrow_backticks():
    text = "```html\n<p>x</p>\n```" + "y" * 5000
    fenced = env_catalogue._fenced(text)
    assert fenced.startswith("````text\n") and "(3" in fenced and len(fenced) < 2000


# ---------------------------------------------------------------------------------------------- API reference
def _package(tmp_path, files):
    for rel, source in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return tmp_path


def test_docstring_checker_flags_missing_docstrings(tmp_path):
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": '"""The package."""\n',
            "pkg/good.py": '''
                """Documented."""
                from dataclasses import dataclass
                def f():
                    """F."""
                def _private(): pass
                class C:
                    """C."""
                    def method(self):
                        """M."""
                    def _helper(self): pass
                    def __repr__(self): return ""
                    @property
                    def x(self):
                        """X."""
                    @x.setter
                    def x(self, v): pass
            ''',
            "pkg/bad.py": '''
                from dataclasses import dataclass
                def f(): pass
                @dataclass
                class D:
                    a: int = 0
                class C:
                    """C."""
                    def method(self): pass
            ''',
            "pkg/exported.py": '''
                """Only __all__ is public."""
                from pkg.good import f as g
                __all__ = ["listed", "g"]
                def listed(): pass
                def unlisted(): pass
            ''',
            "pkg/_private.py": "def f(): pass\n",
        },
    )
    modules = api_reference.public_modules("pkg", root)
    assert modules == ["pkg", "pkg.bad", "pkg.exported", "pkg.good"]
    problems = api_reference.missing_docstrings(modules, root)
    names = [p.split(": ", 1)[1] for p in problems]
    assert names == ["pkg.bad (module)", "pkg.bad.f", "pkg.bad.D", "pkg.bad.C.method", "pkg.exported.listed"]
    assert problems[1].startswith("pkg/bad.py:3:")  # file:line points at the definition


def test_turnkit_public_api_is_documented():
    modules = api_reference.public_modules()
    assert "turnkit.envs.core" in modules and not any("._" in m for m in modules)
    assert api_reference.missing_docstrings(modules) == []


def test_every_public_module_is_on_an_api_page():
    modules = api_reference.public_modules()
    pkgs = api_reference.packages(modules)
    on_pages = [m for mods in pkgs.values() for m in mods]
    assert sorted(on_pages) == modules
    assert "::: turnkit.envs.core\n" in api_reference.render_package("turnkit.envs", pkgs["turnkit.envs"])


# ---------------------------------------------------------------------------------------------- build checks
def test_external_assets_flags_network_assets_only(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text(
        '<a href="https://example.org/">a link is fine</a><img src="../img/x.png">'
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">'
        "<script src='//cdn.example/x.js'></script><style>@import 'https://x.org/y.css';</style>"
    )
    (tmp_path / "site.css").write_text("body { background: url(https://x.org/bg.png) } .a { background: url(i.png) }")
    assert build.external_assets(tmp_path) == [
        "a/index.html: https://x.org/y.css",
        "a/index.html: https://fonts.googleapis.com/css?family=Roboto",
        "a/index.html: //cdn.example/x.js",
        "site.css: https://x.org/bg.png",
    ]


def test_outside_links_are_found_outside_code_only(tmp_path):
    text = "see [bench](../BENCHMARKS.md#x) and `[log π](y_w)`\n```\n[a](../README.md)\n```\n[web](https://x.org)"
    assert hooks._links(text) == ["../BENCHMARKS.md#x", "https://x.org"]
    origin = hooks.DOCS / "training.md"
    assert hooks._outside_target(origin, "../BENCHMARKS.md#x") == hooks.ROOT / "BENCHMARKS.md"
    assert hooks._outside_target(origin, "synth.md") is None  # inside docs/: MkDocs checks it itself
    assert hooks._outside_target(origin, "../no-such-file.md") is None  # left for --strict to report
    assert hooks._bundled_uri(hooks.ROOT / "BENCHMARKS.md") == "repo/BENCHMARKS.md"


@pytest.mark.parametrize("folder", ["envs/", "studies/"])
def test_nav_folders_expand_to_their_pages(folder):
    config = {"nav": [{"Home": "index.md"}, {"How-tos": ["tools.md"]}, {"Group": folder}]}
    nav = hooks.on_config(config)["nav"]
    pages = nav[2]["Group"]
    assert pages == sorted(pages, key=hooks._readme_first) and all(p.startswith(folder) for p in pages)
    assert "writing-an-env.md" in nav[1]["How-tos"]  # a top-level page the nav did not name is appended


def test_sphinx_roles_become_cross_references_for_dotted_names_only():
    html = (
        ":class:<code>~turnkit.browser.Tab</code>, :func:<code>turnkit.collect</code>, :attr:<code>splits</code>, "
        ":meth:<code>sample &lt;turnkit.agents.hf.HFPolicy.with_sampling&gt;</code>"
    )
    assert hooks.on_page_content(html, None, None, None) == (
        '<autoref identifier="turnkit.browser.Tab" optional><code>Tab</code></autoref>, '
        '<autoref identifier="turnkit.collect" optional><code>turnkit.collect</code></autoref>, '
        "<code>splits</code>, "  # a bare name would match unrelated headings (Splits) on other pages
        '<autoref identifier="turnkit.agents.hf.HFPolicy.with_sampling" optional><code>sample</code></autoref>'
    )
