"""The stub ``python/watchcache/_core.pyi`` and the compiled ``watchcache._core`` agree.

The stub is parsed with ``ast``. For the module and each class: every name the stub declares
exists at runtime with the same kind (property / method / attribute), and every public name
the runtime has is declared in the stub. Dunder methods count when the stub lists them;
pybind11's own machinery (constructors, reprs, pickling hooks) is allowed through a short
explicit list. ``_ReadView`` is a typing-only base: Tree and Snapshot must each carry all of
its members. Parameter names of methods (of overloaded ones when all overloads agree) must match
the runtime signature pybind11 writes into each docstring, so keyword calls written against the
stub work.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

from watchcache import _core

STUB = Path(__file__).resolve().parents[2] / "python" / "watchcache" / "_core.pyi"
TYPING_ONLY_BASE = "_ReadView"

# Dunders pybind11 (or Python) defines on every bound class whether or not the stub lists them.
RUNTIME_EXTRAS = frozenset(
    {
        "__init__",
        "__new__",
        "__repr__",
        "__str__",
        "__getstate__",
        "__setstate__",
        "__doc__",
        "__module__",
        "__dict__",
        "__weakref__",
        "__hash__",
        "__ne__",
        "__annotations__",
        "__qualname__",
        "__firstlineno__",
        "__static_attributes__",
        "_pybind11_conduit_v1_",
        # Item is a C type (convert.hpp says why): its tp_richcompare shows all six
        # comparison dunders; all but __eq__/__ne__ answer NotImplemented.
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
    }
)
# Stub-only dunders and what provides them at runtime on Python 3.11:
#  * __buffer__/__release_buffer__ (PEP 688) are C slots without Python names before 3.12;
#  * __reduce__ comes from object.__reduce_ex__ when pybind11 defines __getstate__/__setstate__.
STUB_ONLY_DUNDERS = frozenset({"__buffer__", "__release_buffer__", "__reduce__"})


@dataclass
class StubMember:
    kind: str  # "property", "method" or "attribute"
    params: list[str] | None = None  # None when overloads name parameters differently
    settable: bool = False


@dataclass
class StubClass:
    name: str
    bases: list[str]
    members: dict[str, StubMember] = field(default_factory=dict)


def _decorator_names(node: ast.FunctionDef) -> list[str]:
    names = []
    for d in node.decorator_list:
        if isinstance(d, ast.Name):
            names.append(d.id)
        elif isinstance(d, ast.Attribute):
            names.append(d.attr)
    return names


def _param_names(node: ast.FunctionDef) -> list[str]:
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return [n for n in names if n not in ("self", "cls")]


def _class_members(node: ast.ClassDef) -> dict[str, StubMember]:
    members: dict[str, StubMember] = {}
    for child in node.body:
        if isinstance(child, ast.FunctionDef):
            decorators = _decorator_names(child)
            if "setter" in decorators:
                members[child.name].settable = True
            elif "property" in decorators:
                members[child.name] = StubMember("property")
            elif child.name in members:  # another @overload: keep names all overloads share
                same = members[child.name].params == _param_names(child)
                members[child.name].params = members[child.name].params if same else None
            else:
                members[child.name] = StubMember("method", params=_param_names(child))
        elif isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name):
            members[child.target.id] = StubMember("attribute")
    return members


def parse_stub() -> tuple[dict[str, StubClass], dict[str, StubMember]]:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    classes: dict[str, StubClass] = {}
    module: dict[str, StubMember] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            classes[node.name] = StubClass(node.name, bases, _class_members(node))
        elif isinstance(node, ast.FunctionDef):
            module[node.name] = StubMember("method", params=_param_names(node))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            module[node.target.id] = StubMember("attribute")
    return classes, module


STUB_CLASSES, STUB_MODULE = parse_stub()
RUNTIME_CLASSES = sorted(n for n in STUB_CLASSES if n != TYPING_ONLY_BASE)


def declared_members(name: str) -> dict[str, StubMember]:
    """A stub class's members including those of its stub-declared bases."""
    cls = STUB_CLASSES[name]
    members: dict[str, StubMember] = {}
    for base in cls.bases:
        if base in STUB_CLASSES:
            members.update(declared_members(base))
    members.update(cls.members)
    return members


def own_dunders(cls: type) -> set[str]:
    """Dunders defined by the class or a base other than ``object`` and pybind11's base."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object or klass.__module__ == "pybind11_builtins":
            continue
        names.update(n for n in vars(klass) if n.startswith("__") and n.endswith("__"))
    return names


def runtime_public(obj: type | ModuleType) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


_SIGNATURE = re.compile(r"^\s*(?:\d+\.\s*)?(\w+)\((.*)\)(?:\s*->.*)?$")


def _split_top_level(text: str) -> list[str]:
    parts, depth, quote, current = [], 0, "", []
    for ch in text:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current))
    return parts


def runtime_params(func: object, name: str) -> list[str] | None:
    """Parameter names from pybind11's docstring signature; None when unknown or overloaded."""
    try:
        return [p for p in inspect.signature(func).parameters if p not in ("self", "cls")]  # type: ignore[arg-type]
    except (TypeError, ValueError):
        pass
    doc = getattr(func, "__doc__", None) or ""
    lines = [line for line in doc.splitlines() if line.strip()]
    if not lines or lines[0].strip().startswith("Overloaded function"):
        return None
    match = _SIGNATURE.match(lines[0])
    if not match or match.group(1) != name:
        return None
    names = []
    for part in _split_top_level(match.group(2)):
        param = re.split(r"[:=]", part, maxsplit=1)[0].strip()
        if param and param not in ("*", "/", "self", "cls"):
            names.append(param.lstrip("*"))
    return names


def runtime_kind(owner: type, name: str) -> str:
    for klass in owner.__mro__:
        if name in vars(klass):
            raw = vars(klass)[name]
            # A C type's read-only attributes are getset descriptors: properties to a stub.
            if isinstance(raw, property) or inspect.isgetsetdescriptor(raw):
                return "property"
            if isinstance(raw, (staticmethod, classmethod)) or callable(raw):
                return "method"
            return "attribute"
    return "missing"


# ---- tests ---------------------------------------------------------------------------------


def test_stub_parses_and_declares_the_engine_classes() -> None:
    assert {"Item", "Selector", "ScanResult", "Cursor", "Snapshot", "Tree"} <= set(STUB_CLASSES)
    assert {"SnapshotRegistry", "SnapshotUsage", TYPING_ONLY_BASE} <= set(STUB_CLASSES)
    assert "live_counters" in STUB_MODULE


def test_module_level_names_match_the_stub() -> None:
    declared = {n for n in (*STUB_CLASSES, *STUB_MODULE) if not n.startswith("_")}
    declared |= {n for n in STUB_MODULE if n.startswith("__")}  # __version__
    missing = sorted(n for n in declared if not hasattr(_core, n))
    undeclared = sorted(runtime_public(_core) - declared)
    assert not missing, f"declared in the stub but not in _core: {missing}"
    assert not undeclared, f"in _core but not declared in the stub: {undeclared}"
    assert not hasattr(_core, TYPING_ONLY_BASE), "_ReadView is typing-only"
    for name, member in STUB_MODULE.items():
        if member.kind == "method":
            assert callable(getattr(_core, name)), name
    assert isinstance(_core.__version__, str)
    assert isinstance(_core.FANOUT, int)


@pytest.mark.parametrize("class_name", RUNTIME_CLASSES)
def test_class_members_match_the_stub(class_name: str) -> None:
    cls = getattr(_core, class_name)
    assert isinstance(cls, type)
    declared = declared_members(class_name)
    problems: list[str] = []
    for name, member in sorted(declared.items()):
        if name in STUB_ONLY_DUNDERS:
            continue
        kind = runtime_kind(cls, name)
        if name.startswith("__") and name not in own_dunders(cls) and name != "__init__":
            problems.append(f"{name}: declared, but only inherited from object at runtime")
        elif kind == "missing":
            problems.append(f"{name}: declared, missing at runtime")
        elif kind != member.kind:
            problems.append(f"{name}: stub says {member.kind}, runtime has a {kind}")
        elif member.settable and getattr(cls, name).fset is None:
            problems.append(f"{name}: stub has a setter, runtime property is read-only")
    public = runtime_public(cls)
    problems += [f"{n}: at runtime, not in the stub" for n in sorted(public - set(declared))]
    extra_dunders = own_dunders(cls) - set(declared) - RUNTIME_EXTRAS
    problems += [f"{n}: runtime dunder not in the stub" for n in sorted(extra_dunders)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("class_name", ["Tree", "Snapshot"])
def test_tree_and_snapshot_carry_every_read_view_member(class_name: str) -> None:
    cls = getattr(_core, class_name)
    read_view = STUB_CLASSES[TYPING_ONLY_BASE].members
    missing = [
        name
        for name, member in read_view.items()
        if runtime_kind(cls, name) != member.kind
        or (name.startswith("__") and name not in own_dunders(cls))
    ]
    assert not missing, f"{class_name} lacks _ReadView members {missing}"


def _method_cases() -> list[tuple[str, str]]:
    cases = []
    for class_name in RUNTIME_CLASSES:
        for name, member in declared_members(class_name).items():
            public_or_init = name == "__init__" or not name.startswith("__")
            if member.kind == "method" and member.params is not None and public_or_init:
                cases.append((class_name, name))
    return cases


@pytest.mark.parametrize(("class_name", "method"), _method_cases())
def test_method_parameter_names_match_the_stub(class_name: str, method: str) -> None:
    declared = declared_members(class_name)[method].params
    cls = getattr(_core, class_name)
    func = getattr(cls, method)
    if method == "__init__" and func is object.__init__:
        func = cls  # a C type constructed by tp_new: the signature is the type's own
    runtime = runtime_params(func, method)
    if runtime is None:
        pytest.skip(f"{class_name}.{method} has no single runtime signature to compare")
    assert runtime == declared, f"{class_name}.{method}: runtime {runtime}, stub {declared}"


def test_module_function_parameter_names_match_the_stub() -> None:
    for name, member in STUB_MODULE.items():
        if member.kind == "method" and member.params is not None:
            runtime = runtime_params(getattr(_core, name), name)
            assert runtime in (None, member.params), (
                f"{name}: runtime {runtime}, stub {member.params}"
            )


def test_stub_only_dunders_are_provided_another_way() -> None:
    item = _core.Item("k", b"value")
    assert memoryview(item).tobytes() == b"value", "Item exports its value as a buffer"
    for cls in (_core.Item, _core.Snapshot):
        dunders = own_dunders(cls)
        assert "__reduce__" in dunders or {"__getstate__", "__setstate__"} <= dunders, (
            f"{cls.__name__} is declared picklable"
        )
    assert _core.Item.__hash__ is not None, "Item defines __eq__ and must stay hashable"
