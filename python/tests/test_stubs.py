"""The type stubs: installed with the package, and naming exactly what the
extension module defines, so they cannot drift from it unnoticed."""

import ast
import importlib.resources

import deltacells
from deltacells import _deltacells


def stub():
    text = (importlib.resources.files("deltacells") / "_deltacells.pyi").read_text()
    return ast.parse(text)


def public(names):
    return {n for n in names if not n.startswith("_")}


def test_the_package_is_marked_typed_and_ships_the_extension_stub():
    files = importlib.resources.files("deltacells")
    assert (files / "py.typed").is_file()
    assert (files / "_deltacells.pyi").is_file()


def test_the_stub_names_every_class_member_function_and_constant_of_the_extension():
    tree = stub()
    # Private classes (protocols of what several classes share) hold members
    # of the public classes that name them as bases.
    every = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    classes = {name: node for name, node in every.items() if not name.startswith("_")}
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    constants = {node.target.id for node in tree.body if isinstance(node, ast.AnnAssign)}
    runtime_classes = {name for name in dir(_deltacells)
                       if isinstance(getattr(_deltacells, name), type)}
    runtime_functions = {name for name in public(dir(_deltacells))
                         if callable(getattr(_deltacells, name)) and name not in runtime_classes}
    assert set(classes) == runtime_classes
    assert functions == runtime_functions
    assert constants == public(dir(_deltacells)) - runtime_classes - runtime_functions | {"__version__"}
    for name, node in classes.items():
        bodies = [node] + [every[b.id] for b in node.bases
                           if isinstance(b, ast.Name) and b.id in every]
        declared = {d.name for n in bodies for d in n.body if isinstance(d, ast.FunctionDef)}
        runtime = getattr(_deltacells, name)
        assert public(declared) == public(dir(runtime)) - public(dir(object)), name
        for dunder in declared - public(declared):
            assert hasattr(runtime, dunder), (name, dunder)


def test_the_package_exports_what_its_all_lists():
    for name in deltacells.__all__:
        assert hasattr(deltacells, name), name
