"""Differential test: the Python Go-template engine beside real Go text/template.

Generates templates (a fixed corpus plus seeded random ones over the constructs maand templates
use), renders each with tests/integration/files/gotemplate/render.go (Go's own text/template) and
with plugins/plugin_utils/gotemplate/, and compares: the same output, and an error in one
exactly when there is an error in the other (with the same "template: NAME:LINE" location).
Skipped when no `go` toolchain is installed (Debian: apt-get install golang-go).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import gotemplate as _gotemplate

GO = shutil.which("go")
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "files", "gotemplate", "render.go")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(GO is None, reason="no go toolchain (apt-get install golang-go)")]

DATA = {
    "a": 3, "neg": -7, "zero": 0, "b": "str", "html": "<a href='x'>&\"</a>", "f": 2.5,
    "big": 1234567.0, "tiny": 0.00001, "whole": 4.0, "l": [1, 2, 3], "e": [], "em": {},
    "m": {"x": 1, "y": "z", "a": [1, "b"]}, "n": None, "t": True, "no": False,
    "s": ["a", "b", "c"], "nested": {"k": {"v": 7}}, "u": "héllo wörld", "sp": "  pad  ",
}

# Python stand-ins for render.go's FuncMap.
FUNCS = {
    "upper": lambda s: s.upper(),
    "join": lambda a, sep: sep.join(a),
    "add": lambda a, b: a + b,
}
FUNCS["upper"].__annotations__ = {"s": str}
FUNCS["add"].__annotations__ = {"a": int, "b": int}
FUNCS["join"].__annotations__ = {"a": list, "sep": str}

CORPUS = [
    "", "plain", "{{.a}}", "{{.missing}}", "{{.m.missing}}", "{{.n}}", "{{.n.x}}", "{{.a.x}}",
    "{{.}}", "{{$}}", "{{.m}}", "{{.l}}", "{{.e}}", "{{.nested}}", "{{.f}} {{.big}} {{.tiny}}",
    "{{.whole}}", "{{print .whole .a .b .b .a}}", "{{println .l .m}}", "{{print nil}}",
    "{{printf \"%v %d %s\" .a .a .b}}", "{{printf \"%5.2f|%-6s|%06d|%x|%X|%o|%q|%t\" .f .b .a .a"
    " .a .a .b .t}}", "{{printf \"%d\" .b}}", "{{printf \"%s\" .a}}", "{{printf \"%d %d\" 1}}",
    "{{printf \"%d\" 1 2}}", "{{printf \"%v\" .n}}", "{{printf \"%s\" .n}}",
    "{{printf \"%T %T %T %T %T %T\" .a .f .b .t .l .m}}", "{{printf \"%e %g %E %G\" .big .big"
    " .tiny .tiny}}", "{{printf \"%x %X %q\" .u .b .u}}", "{{printf \"%c %U %q\" 65 65 65}}",
    "{{printf \"%+d % d %+.1f\" .a .a .f}}", "{{printf \"%8.3f|%-8.3f|%08.3f\" .f .f .neg}}",
    "{{printf \"%.2s|%5.1s|\" .b .b}}", "{{printf \"%v\" .m}}", "{{printf \"%d\" .l}}",
    "{{printf \"%s\" .s}}", "{{printf \"%q\" .s}}", "{{printf \"%%\"}}", "{{printf \"%\"}}",
    "{{printf \"%z\" .a}}", "{{html .html}}", "{{js .html}}", "{{urlquery .html .u}}",
    "{{js .u}}", "{{html .n}}", "{{len .l}} {{len .m}} {{len .b}} {{len .u}}", "{{len .a}}",
    "{{len .n}}", "{{index .l 1}} {{index .m \"x\"}} {{index .nested \"k\" \"v\"}}",
    "{{index .l 5}}", "{{index .m \"nope\"}}", "{{index .b 1}}", "{{index .l -1}}",
    "{{slice .l 1}} {{slice .l 1 2}} {{slice .b 1 2}} {{slice .l}}", "{{slice .l 2 1}}",
    "{{not .a}} {{not .zero}} {{not .e}} {{not .n}}", "{{and .a .b}} {{and .zero .b}}"
    " {{or .zero .e .b}} {{or .zero .e}}", "{{and}}", "{{eq .a 3}} {{eq .b \"str\"}}"
    " {{eq .a 1 2 3}} {{ne .a 3}}", "{{eq .a .b}}", "{{eq .a .f}}", "{{eq .n .n}}",
    "{{lt .a 4}} {{le .a 3}} {{gt .f 2.0}} {{ge .b \"abc\"}}", "{{lt .t .t}}", "{{lt .a .f}}",
    "{{if .a}}yes{{end}}", "{{if .zero}}yes{{else}}no{{end}}", "{{if .e}}a{{else if .l}}b"
    "{{else}}c{{end}}", "{{if .n}}a{{else if .em}}b{{else}}c{{end}}",
    "{{range .l}}[{{.}}]{{end}}", "{{range $i, $v := .s}}{{$i}}={{$v}};{{end}}",
    "{{range $k, $v := .m}}{{$k}}={{$v}};{{end}}", "{{range .e}}x{{else}}empty{{end}}",
    "{{range .n}}x{{else}}nil{{end}}", "{{range .b}}x{{end}}",
    "{{range $i, $v := .l}}{{if eq $v 2}}{{continue}}{{end}}{{$v}}{{end}}",
    "{{range .l}}{{if eq . 2}}{{break}}{{end}}{{.}}{{end}}", "{{range $x := .l}}{{$x}}{{end}}",
    "{{with .m}}{{.x}}{{end}}", "{{with .e}}x{{else}}y{{end}}", "{{with $x := .a}}{{$x}}{{end}}",
    "{{$x := 1}}{{$x = 2}}{{$x}}", "{{$x := .a}}{{range .l}}{{$x}}{{end}}",
    "{{$x := 1}}{{if true}}{{$x = 5}}{{end}}{{$x}}", "{{$y}}", "{{$x = 1}}",
    "{{define \"t\"}}T({{.}}){{end}}{{template \"t\" .a}}{{template \"t\"}}",
    "{{template \"nope\"}}", "{{block \"b\" .b}}[{{.}}]{{end}}",
    "{{define \"r\"}}{{if gt . 0}}{{.}}{{template \"r\" (add . -1)}}{{end}}{{end}}"
    "{{template \"r\" 3}}", "a  {{- .a -}}  b", "a\n{{- /* c */ -}}\nb", "{{/* c */}}x",
    "{{- .a}}", "{{.a -}}", "x {{- 3 }} y", "{{(.m).x}}", "{{(index .l 0)}}",
    "{{.a | printf \"%d!\"}}", "{{\"x\" | printf \"%s-%s\" \"y\"}}", "{{.b | upper}}",
    "{{join .s \",\"}}", "{{upper .a}}", "{{add 1 2}} {{add .a .a}}", "{{add 1}}",
    "{{nope}}", "{{.a 1}}", "{{1 2}}", "{{.b.c}}", "{{if}}{{end}}", "{{end}}",
    "{{range .l}}", "{{else}}", "{{.a}", "{{\"unterminated}}", "{{`raw\nline`}}",
    "{{'a'}} {{0x1F}} {{1e3}} {{-2}} {{+3}} {{0o17}} {{0b101}} {{1_000}} {{3.0}}",
    "{{printf \"%v %v\" 1.0 100000000000000000000.0}}", "{{1e21}} {{1e20}} {{1e-5}} {{1e-4}}",
    "{{.u}} {{len .u}} {{printf \"%q\" \"\\t\\u00e9\"}}", "line1\nline2 {{.a.b}}",
    "{{\"a\" | printf}}", "{{3 | printf}}", "{{nil}}", "{{.a | .b}}", "{{call .a}}",
    "{{index .n 1}}", "{{$x := .l}}{{index $x 2}}", "{{.m.a}}", "{{len .m.a}}",
]


def _random_template(rng: random.Random) -> str:
    atoms = [".a", ".b", ".f", ".l", ".m", ".m.x", ".n", ".t", ".zero", ".e", ".s", ".missing",
             "1", "-2", "2.5", "\"q\"", "true", "false", "$", ".nested.k.v", ".u", ".whole"]
    funcs = ["len", "not", "print", "println", "html", "js", "urlquery", "eq", "ne", "lt",
             "index", "and", "or", "printf \"%v|%d|%s\"", "printf \"%5.1f\"", "slice"]

    def expr(depth: int) -> str:
        if depth <= 0 or rng.random() < 0.4:
            return rng.choice(atoms)
        fn = rng.choice(funcs)
        args = " ".join(expr(depth - 1) if rng.random() < 0.7 else "(%s)" % expr(depth - 1)
                        for dummy in range(rng.randint(1, 3)))
        return "%s %s" % (fn, args)

    def block(depth: int) -> str:
        kind = rng.randint(0, 5)
        if depth <= 0 or kind == 0:
            return "{{%s}}" % expr(2)
        if kind == 1:
            return "{{if %s}}%s{{else}}%s{{end}}" % (expr(1), block(depth - 1), block(depth - 1))
        if kind == 2:
            return "{{range $i, $v := %s}}{{$i}}:{{$v}},%s{{end}}" % (
                rng.choice([".l", ".m", ".s", ".e", ".n", ".b"]), block(depth - 1))
        if kind == 3:
            return "{{with %s}}<{{.}}>%s{{else}}none{{end}}" % (expr(1), block(depth - 1))
        if kind == 4:
            return "{{$v := %s}}[{{$v}}]" % expr(1)
        return "t{{- %s -}} u" % rng.choice(atoms)

    return "".join(block(2) for dummy in range(rng.randint(1, 3)))


@pytest.fixture(scope="module")
def go_renderer(tmp_path_factory):
    build = tmp_path_factory.mktemp("gorender")
    shutil.copy(SOURCE, build / "render.go")
    env = dict(os.environ, GOFLAGS="-mod=mod", GOCACHE=str(build / "cache"),
               GOPATH=str(build / "gopath"))
    subprocess.run([GO, "mod", "init", "render"], cwd=build, check=True, env=env,
                   capture_output=True)
    subprocess.run([GO, "build", "-o", "render", "."], cwd=build, check=True, env=env,
                   capture_output=True, timeout=600)
    return str(build / "render")


def _go_render(binary: str, cases: list[dict]) -> list[dict]:
    proc = subprocess.run([binary], input=json.dumps(cases), capture_output=True, text=True,
                          check=True, timeout=300)
    return json.loads(proc.stdout)


def _py_render(case: dict) -> dict:
    try:
        return {"out": _gotemplate.parse(case["text"], case["name"], FUNCS).execute(case["data"]),
                "err": ""}
    except _gotemplate.TemplateError as exc:
        return {"out": None, "err": str(exc)}


def _location(err: str) -> str:
    """template: NAME:LINE (Go's error prefix, column excluded)."""
    head = err.split(": ")[1] if err.startswith("template: ") else err
    return ":".join(head.split(":")[:2])


def _cases() -> list[dict]:
    rng = random.Random(20261123)
    texts = CORPUS + [_random_template(rng) for dummy in range(400)]
    return [{"name": "t%d" % i, "text": t, "data": DATA} for i, t in enumerate(texts)]


def test_engine_matches_go(go_renderer):
    cases = _cases()
    want = _go_render(go_renderer, cases)
    mismatches = []
    for case, go in zip(cases, want):
        py = _py_render(case)
        if bool(go["err"]) != bool(py["err"]):
            mismatches.append((case["text"], go, py))
        elif not go["err"] and go["out"] != py["out"]:
            mismatches.append((case["text"], go, py))
        elif go["err"] and _location(go["err"]) != _location(py["err"]):
            mismatches.append((case["text"], go, py))
    report = "\n".join("%r\n  go: %r\n  py: %r" % m for m in mismatches[:40])
    assert not mismatches, "%d of %d templates differ from Go:\n%s" % (
        len(mismatches), len(cases), report)
