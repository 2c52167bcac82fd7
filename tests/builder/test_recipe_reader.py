"""Recipes are read by rattler-build's own parser, not with regular expressions (issue 29.3).

deepep_env/builder/recipegraph.py's ``read_recipe`` is the one reader: py-rattler-build's typed stage-0
recipe for the structure, Jinja's parser for the ``${{ … }}`` templates in it. Here:

- a recipe written in forms a text pattern misreads (a comment that looks like a package, quoted
  keys, flow-style lists and mappings, block scalars, an expression whose text looks like a pin, a
  ``dep_<x>`` used inside an expression, a pin by keyword) reads as rattler-build reads it;
- no module that reads recipes imports ``re``;
- a recipe rattler-build refuses is one error line naming the file, from the library, the graph
  and the CLI; the builder's render path says the same through the same parser.
"""
from __future__ import annotations

import ast

import pytest

from build_fixtures import REPO, add_recipe
from cli_runner import cli_in_process
from deepep_env.builder.driver import render
from deepep_env.builder.graph import nodes_from_recipe_dirs, recipe_dirs_under
from deepep_env.base.errors import UserError
from deepep_env.builder.recipegraph import read_recipe, recipe_edges

TRICKY = r"""
# package: {name: wrong-name, version: "9"}   <- a comment, not the package
context:
  "name": real-pkg   # a quoted key
  'ver': "2.0"
package: {"name": "${{ name }}", 'version': "${{ ver }}"}
source:
  - {path: ../src}   # flow style
requirements:
  "build": [cmake, "${{ compiler('c') }}"]
  host: ["libfoo ${{ dep_foo ~ '' }}", {if: with_z, then: [zlib], else: bzip2}]
  run:
    - >-
      bar
      >=1
    - |
      qux
    - "${{ 'pin_subpackage(\"ghost\")' }}"
    - ${{ pin_subpackage(name='baz', exact=True) }}
"""


def test_forms_a_pattern_would_misread_read_as_rattler_build_reads_them(tmp_path):
    d = add_recipe(tmp_path, "folder", TRICKY)
    i = read_recipe(d)
    assert (i.package, i.version, i.outputs) == ("real-pkg", "2.0", ["real-pkg"])   # not the comment's
    assert i.path_sources == ["../src"]
    # a string constant that merely spells a pin is no requirement; a pin by keyword is one
    assert i.requirements == {"cmake", "libfoo", "zlib", "bzip2", "bar", "qux", "baz"}
    assert i.unconditional == {"cmake", "libfoo", "bar", "qux", "baz"}
    assert i.built_against == {"cmake", "libfoo", "zlib", "bzip2", "baz"}   # run: only the pin
    assert i.dep_refs == {"foo"}                       # dep_foo read inside an expression
    assert i.context == {"name", "ver"}
    assert {"with_z", "dep_foo", "name", "ver"} <= i.reads and "compiler" not in i.reads


def test_tricky_forms_make_the_edges(tmp_path):
    add_recipe(tmp_path, "folder", TRICKY)
    add_recipe(tmp_path, "foo", "package: {name: foo, version: '1'}\n")
    add_recipe(tmp_path, "baz-folder", "recipe: {name: baz-src, version: '1'}\noutputs:\n  - package: {name: baz}\n")
    add_recipe(tmp_path, "ghost", "package: {name: ghost, version: '1'}\n")
    infos = {i.package: i for i in map(read_recipe, recipe_dirs_under(tmp_path))}
    edges = recipe_edges(infos)
    assert edges["real-pkg"].build == {"foo", "baz-src"} and not edges["real-pkg"].run   # no edge to ghost


def test_no_recipe_reader_uses_regular_expressions():
    for rel in ("deepep_env/builder/recipegraph.py", "deepep_env/builder/graph.py", "deepep_env/builder/preview.py"):
        tree = ast.parse((REPO / rel).read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "re" not in imported and "yaml" not in imported, rel


MALFORMED = {
    "yaml": ("package: {name: x\n", "Failed to parse YAML"),
    "schema": ("package: {name: x, version: '1'}\nbuidl: {number: 0}\n", "unknown top-level field 'buidl'"),
    "field": ("package: {name: x}\n", "missing required field 'version'"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_recipe_is_one_line_naming_the_file(case, tmp_path, capsys):
    text, says = MALFORMED[case]
    d = add_recipe(tmp_path / "recipes", "bad", text)
    file = d / "recipe.yaml"
    for call in (lambda: read_recipe(d), lambda: nodes_from_recipe_dirs([d])):
        with pytest.raises(UserError) as err:
            call()
        msg = str(err.value)
        assert "\n" not in msg and err.value.exit_code == 2
        assert msg.startswith(f"{file}: recipe does not parse: ") and says in msg, msg
    # the builder parses with the same parser: the same line, with the package it was building
    with pytest.raises(UserError) as err:
        render(file, {}, package="bad")
    assert str(err.value).startswith(f"{file}: package bad: recipe does not parse: ") and says in str(err.value)

    rc, out, err_text = cli_in_process(capsys, "fetch", "--recipes", tmp_path / "recipes",
                                       "--source-cache", tmp_path / "sources", "--offline")
    assert rc == 2 and out == "" and err_text.count("\n") == 1 and "Traceback" not in err_text
    assert f"{file}: recipe does not parse: " in err_text and says in err_text


def test_missing_recipe_is_named(tmp_path):
    with pytest.raises(UserError, match="missing recipe"):
        read_recipe(tmp_path)


def test_an_undefined_variable_is_named_from_the_parsed_recipe(tmp_path):
    d = add_recipe(tmp_path, "u", """
        context: {name: u}
        package: {name: "${{ name }}", version: "1"}
        requirements:
          host:
            - if: flavour == "big"
              then: [zlib]
          run:
            - "zlib ${{ zlib_pin }}"
        build:
          script:
            - echo ${{ compiler_note | upper }}
        """)
    with pytest.raises(UserError) as err:
        render(d / "recipe.yaml", {"flavour": "big"}, package="u")
    assert "recipe does not render" in str(err.value)
    assert "(undefined: compiler_note, zlib_pin)" in str(err.value)
