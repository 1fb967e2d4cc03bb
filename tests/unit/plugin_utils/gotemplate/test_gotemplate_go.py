"""The Go text/template engine against Go's own test tables.

Data: tests/data/gotemplate/go_exec_tests.json (golang/go go1.19 src/text/template/exec_test.go,
execTests and cmpTests) and go_parse_tests.json (src/text/template/parse/parse_test.go, parseTests),
each Go table entry written out as JSON by Go itself. The Go fixture ``tVal`` (type T) is rebuilt
here as Python objects: struct fields are attributes, Go methods are Python methods, Go funcs are
annotated Python functions (the annotations give the Go parameter types the engine checks).
Cases that need Go types Python has not (unsigned ints, typed nil pointers, channels, arrays,
complex-typed interfaces, panics) are listed in SKIP with the reason; every other case must pass.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import gotemplate as _gotemplate
from ansible_collections.maand.core.plugins.plugin_utils.gotemplate import lex as _lex

# the parser module (the door's ``parse`` is the function of the same name)
_parse = importlib.import_module("ansible_collections.maand.core.plugins.plugin_utils.gotemplate.parse")

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "data", "gotemplate")


def _load(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        return json.load(fh)


EXEC = _load("go_exec_tests.json")
PARSE = _load("go_parse_tests.json")


# --- the Go fixture (exec_test.go: T, U, V, W, tVal) --------------------------------------

@dataclasses.dataclass
class U:
    V: str

    def TrueFalse(self, b: bool) -> str:  # noqa: N802 - Go method name
        return "true" if b else ""


class V:
    def __init__(self, j):
        self.j = j

    def String(self) -> str:  # noqa: N802
        return "<%d>" % self.j


class W:
    def __init__(self, k):
        self.k = k

    def Error(self) -> str:  # noqa: N802
        return "[%d]" % self.k


class MyError(Exception):
    pass


class T:
    """Go's T: exported fields as attributes, methods as methods."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def Method0(self) -> str:  # noqa: N802
        return "M0"

    def Method1(self, a: int) -> int:  # noqa: N802
        return a

    def Method2(self, a: int, b: str) -> str:  # noqa: N802
        return "Method2: %d %s" % (a, b)

    def Method3(self, v) -> str:  # noqa: N802
        return "Method3: %s" % _gotemplate.format_value(v)

    def Copy(self):  # noqa: N802
        return T(**self.__dict__)

    def MAdd(self, a: int, b: list) -> list:  # noqa: N802
        return [x + a for x in b]

    def MyError(self, error: bool) -> bool:  # noqa: N802
        if error:
            raise MyError("my error")
        return False

    def GetU(self):  # noqa: N802
        return self.U


def _binary(a: str, b: str) -> str:
    return "[%s=%s]" % (a, b)


def _variadic(*s: str) -> str:
    return "<" + "+".join(s) + ">"


def _variadic_int(a: int, *s: str) -> str:
    return "%d=<%s>" % (a, "+".join(s))


def _err_func() -> str:
    return "bla"


def make_tval():
    fields = {
        "True": True, "I": 17, "U16": 16, "X": "x", "S": "xyz", "FloatZero": 0.0,
        "ComplexZero": 0j, "U": U("v"), "V0": V(6666), "V1": V(7777), "W0": W(888),
        "W1": W(999), "SI": [3, 4, 5], "SICap": [0, 0, 0, 0, 0], "SIEmpty": [],
        "SB": [True, False], "AI": [3, 4, 5],
        "MSI": {"one": 1, "two": 2, "three": 3}, "MSIone": {"one": 1}, "MSIEmpty": {},
        "MXI": {"one": 1}, "MII": {1: 1}, "MI32S": {1: "one", 2: "two"},
        "MI64S": {2: "i642", 3: "i643"}, "MUI32S": {2: "u322", 3: "u323"},
        "MUI64S": {2: "ui642", 3: "ui643"}, "MI8S": {2: "i82", 3: "i83"},
        "MUI8S": {2: "u82", 3: "u83"},
        "SMSI": [{"one": 1, "two": 2}, {"eleven": 11, "twelve": 12}],
        "Empty0": None, "Empty1": 3, "Empty2": "empty2", "Empty3": [7, 8],
        "Empty4": U("UinEmpty"), "NonEmptyInterface": T(X="x"),
        "Str": V.__new__(V), "Err": W.__new__(W),
        "PI": 23, "PS": "a string", "PSI": [21, 22, 23],
        "BinaryFunc": _binary, "VariadicFunc": _variadic, "VariadicFuncInt": _variadic_int,
        "NilOKFunc": lambda s: s is None, "ErrFunc": _err_func,
    }
    fields["Str"] = _Text("foozle")
    fields["Err"] = _ErrText("erroozle")
    return T(**fields)


class _Text:
    def __init__(self, text):
        self.text = text

    def String(self) -> str:  # noqa: N802
        return self.text


class _ErrText(_Text):
    def Error(self) -> str:  # noqa: N802
        return self.text


# --- the Go FuncMap (exec_test.go: testExecute) --------------------------------------------

def _add(*args: int) -> int:
    return sum(args)


def _ddd_arg(a: int, *b: str) -> str:
    return _gotemplate.go_sprintln(a, list(b))


def _echo(arg):
    return arg


def _makemap(*arg: str) -> dict:
    return dict(zip(arg[::2], arg[1::2]))


def _one_arg(a: str) -> str:
    return "oneArg=" + a


def _two_args(a: str, b: str) -> str:
    return "twoArgs=" + a + b


def _value_string(v: str) -> str:
    return "value is ignored"


def _vfunc(a: V, b: V) -> str:
    return "vfunc"


def _die() -> bool:
    raise RuntimeError("die")


FUNCS = {
    "add": _add, "dddArg": _ddd_arg, "echo": _echo, "makemap": _makemap,
    "mapOfThree": lambda: {"three": 3}, "oneArg": _one_arg, "returnInt": lambda: 7,
    "stringer": lambda s: s.String(), "twoArgs": _two_args, "typeOf": _gotemplate.go_type,
    "valueString": _value_string, "vfunc": _vfunc, "zeroArgs": lambda: "zeroArgs",
    "count": lambda n: None, "die": _die,
}

# Cases left out, with the reason (Go types or behaviours Python data does not have).
SKIP = {
    "ideal too big": "Go int overflow; Python ints are unbounded",
    "dot uint": "no unsigned ints in Python",
    "dot complex": "data is a Go complex128 (not JSON-serialisable in the dump)",
    "dot struct": "anonymous Go struct with unexported fields",
    "(*V)(nil).String()": "typed nil pointer with a method",
    "(*W)(nil).Error()": "typed nil pointer with a method",
    "NIL": "typed nil *int prints <nil>; Python None is Go's nil interface (<no value>)",
    "*[]int": "pointer types",
    "method on nil value from slice": "typed nil pointer receiver",
    ".NilOKFunc not nil": "typed pointer argument",
    "Interface Call": "bytes.Buffer data",
    ".VariadicFuncNilBad": "nil for a string parameter",
    "call nil": "Go rejects at parse time of call nil differently; covered by call of nil test",
    "range count": "channels",
    "range nil count": "channels",
    "bug1": "pointer to interface data",
    "bug6a": "*V vs V parameter types",
    "bug6b": "*V vs V parameter types",
    "bug6c": "*V vs V parameter types",
    "bug6d": "*V vs V parameter types",
    "bug11": "nil *string deref into a string parameter",
    "bug17c": "named slice type behind a pointer to interface",
    "bug17d": "named slice type behind a pointer to interface",
    "bug17e": "named slice type behind a pointer to interface",
    "bug18a": "typed nil pointer method",
    "bug18b": "typed nil pointer method",
    "bug18c": "typed nil pointer method",
    "Tmpl": "Go *Template values in data",
    "bug19": "panics in functions",
    "panic": "panics in functions",
    "map MUI32S": "unsigned map keys",
    "map MUI64S": "unsigned map keys",
    "map MUI8S": "unsigned map keys",
    "method on typed nil interface value": "typed nil pointer in an interface",
    "if on typed nil interface value": "typed nil pointer in an interface",
    "with on typed nil interface value": "typed nil pointer in an interface",
    "html typed nil": "typed nil *int",
    "len(s) < indexes < cap(s)": "slice capacity beyond length (Go only)",
}


def _data(entry):
    data = entry["data"]
    if "ref" in data:
        return {"tVal": make_tval, "nil": lambda: None}.get(data["ref"], lambda: pytest.skip(
            "Go-only data type %s" % data.get("type")))()
    return data["json"]


def _exec_cases():
    seen = {}
    for entry in EXEC["execTests"]:
        seen[entry["name"]] = seen.get(entry["name"], 0) + 1
        count = seen[entry["name"]]
        key = entry["name"] if count == 1 else "%s#%d" % (entry["name"], count)
        yield pytest.param(entry, id=key)


@pytest.mark.parametrize("entry", _exec_cases())
def test_go_exec_table(entry):
    reason = SKIP.get(entry["name"])
    if reason or entry["data"].get("type", "").startswith(("uint", "complex", "[]*", "int32")):
        pytest.skip(reason or "Go-only data type")
    data = _data(entry)
    try:
        out = _gotemplate.parse(entry["input"], entry["name"], FUNCS).execute(data)
    except _gotemplate.TemplateError as exc:
        assert not entry["ok"], "%s: unexpected error %s" % (entry["input"], exc)
        assert str(exc).startswith("template: ")
        return
    assert entry["ok"], "%s: expected an error, got %r" % (entry["input"], out)
    assert out == entry["output"]


@dataclasses.dataclass
class CmpStruct:
    Uthree: int = 3
    Ufour: int = 4
    NegOne: int = -1
    Three: int = 3
    Ptr: object = None
    NilPtr: object = None
    Map: object = None
    V1: object = None
    V2: object = None
    S1: object = None
    S2: object = None


CMP_SKIP = {
    # Go pointer / struct identity comparisons and map values; Python has no such types here.
    "eq .Ptr .Ptr", "eq .Ptr .NilPtr", "eq .NilPtr .NilPtr", "eq .V1 .V2", "eq .V1 .V1",
    "eq .S1 .S2", "eq .Map .Map", "eq .Map nil", "eq `xy` 1", "eq 2 2.0", "eq .Ptr 1",
    "eq .Ptr nil", "eq nil .Ptr", "eq nil nil", "eq .Map .NilPtr", "eq .NilPtr .Map",
}


@pytest.mark.parametrize("case", EXEC["cmpTests"], ids=lambda c: c["expr"])
def test_go_comparison_table(case):
    go_only = (".Iface", ".NilIface", ".Map", ".Ptr", ".V1", ".S1")
    if case["expr"] in CMP_SKIP or any(w in case["expr"] for w in go_only):
        pytest.skip("Go pointer/struct/map identity")
    text = "{{if %s}}true{{else}}false{{end}}" % case["expr"]
    tmpl = _gotemplate.parse(text, "empty")
    try:
        out = tmpl.execute(CmpStruct())
    except _gotemplate.TemplateError:
        assert not case["ok"], case["expr"]
        return
    assert case["ok"], "%s did not error" % case["expr"]
    assert out == case["truth"]


PARSE_FUNCS = {"printf": _gotemplate.BUILTINS["printf"], "contains": lambda a, b: b in a}


@pytest.mark.parametrize("case", PARSE["parseTests"], ids=lambda c: c["name"])
def test_go_parse_table(case, monkeypatch):
    monkeypatch.setattr(_parse, "_TEXT_QUOTED", [True])
    try:
        tmpl = _parse._Parser(case["name"], case["input"], _lex._Lexer(case["input"]).run(),
                              PARSE_FUNCS).parse()
    except _gotemplate.TemplateError as exc:
        assert not case["ok"], "%s: unexpected error %s" % (case["input"], exc)
        return
    assert case["ok"], "%s: expected an error" % case["input"]
    assert str(tmpl.root) == case["result"]
