"""A ``@triton.jit`` kernel as data, so that compile workers rebuild it without running the
user's program.

``capture(fn)`` asks Python's own scoping rules (``symtable``) which names the kernel's
source reads from outside itself (a name it assigns anywhere is local, as in Python) and
records what each one is in the kernel's scope (its closure cells, then its module
globals): other ``@triton.jit`` helpers and ``@triton.constexpr_function`` functions by
their source (captured the same way, so helpers defined in ``__main__``, in a notebook cell
or inside a function travel too), modules by name, and values (``tl.constexpr``, dtypes,
numbers, strings...) by pickle. Arrays and tensors never travel. ``rebuild`` turns that back
into a ``JITFunction`` in a fresh namespace.

Why not import the kernel's module in the worker: for a script with top-level code and no
main guard, importing ``__main__`` again runs the whole program once per worker; a notebook
cell, ``python -c`` or ``python - < file`` has no file to import; and a kernel defined
inside a function has no importable name. See docs/design-notes.md.
"""

from __future__ import annotations

import base64
import builtins
import importlib
import linecache
import numbers
import pickle
import symtable
import types
from typing import Any

from kerntune._kerntune import SpecError


def remember_main_source() -> None:
    """Makes the source of a program given with ``python -c CODE`` or ``python - < FILE``
    readable by ``inspect``, as a file's or a notebook cell's is, so that ``@triton.jit``
    (which reads its function's source) works there too. Python keeps neither; the code is
    still in ``sys.orig_argv``, and a redirected standard input can be read again from its
    start. Called when kerntune is imported; it does nothing in any other case."""
    import os
    import stat
    import sys

    if getattr(sys, "flags", None) is not None and sys.flags.interactive:
        return
    source, filename = None, None
    argv = getattr(sys, "orig_argv", [])
    if sys.argv[:1] == ["-c"] and "-c" in argv[:-1]:
        source, filename = argv[argv.index("-c") + 1], "<string>"
    elif sys.argv[:1] in (["-"], [""]) and getattr(sys.modules.get("__main__"), "__file__", "<stdin>") == "<stdin>":
        try:
            if stat.S_ISREG(os.fstat(0).st_mode):
                source, filename = os.pread(0, os.fstat(0).st_size, 0).decode("utf-8", "replace"), "<stdin>"
        except OSError:
            return
    if source is not None and filename not in linecache.cache:
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


class CaptureError(SpecError, TypeError):
    """A name the kernel uses whose value cannot be sent to a compile worker."""


def _jit_kinds():
    from triton.runtime.jit import JITFunction

    try:
        from triton.runtime.jit import ConstexprFunction
    except ImportError:  # older Triton
        ConstexprFunction = None
    return JITFunction, ConstexprFunction


def _free_names(name: str, source: str) -> set[str]:
    """The names the function ``source`` (a single ``def``) reads from outside itself, by
    Python's rules: its body's globals and those of anything nested in it, and what its
    defaults and annotations read (they are evaluated where the function is defined).
    Parameters, assigned names, loop, ``with`` and comprehension targets are local even
    where a read comes first; a name of the enclosing function shows up as a global here,
    since the source is analysed on its own, and ``_lookup`` finds it in the closure."""
    try:
        module = symtable.symtable(source, f"<{name}>", "exec")
    except SyntaxError as error:
        raise CaptureError(f"{name} cannot be read on its own: {error.msg} (line {error.lineno} of the function)") from None
    found, tables = set(), [module]
    while tables:
        table = tables.pop()
        found.update(s.get_name() for s in table.get_symbols() if s.is_global() and s.is_referenced())
        tables.extend(table.get_children())
    return found


_MISSING = object()


def _lookup(fn, name: str) -> Any:
    """What ``name`` is where ``fn`` runs: a closure cell shadows a module global, as in
    Python. A cell still empty, or a name bound nowhere (a builtin), gives ``_MISSING``."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    if name in cells:
        try:
            return cells[name].cell_contents
        except ValueError:
            return _MISSING
    return fn.__globals__.get(name, _MISSING)


def _is_array(value: Any) -> bool:
    """Whether ``value`` holds array data (a torch tensor, a numpy, CuPy or JAX array, or
    anything else that offers its memory): such a global is the user's data, megabytes
    that a kernel cannot read from its module anyway, so it must never be pickled into a
    compile job. Numbers (numpy scalars included) and classes are not arrays."""
    if isinstance(value, (type, numbers.Number)):
        return False
    for attribute in ("__cuda_array_interface__", "__array_interface__", "__array__", "__dlpack__", "data_ptr"):
        try:
            if hasattr(value, attribute):
                return True
        except Exception:  # the property exists but refuses this value (a device it does not serve)
            return True
    return False


def _importable(module_name: str, qualname: str, value: Any) -> bool:
    if module_name in (None, "__main__") or "<locals>" in qualname:
        return False
    try:
        found = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:
        return False
    return found is value


class _Capture:
    def __init__(self):
        self.functions: list[dict] = []
        self.index: dict[int, int] = {}

    def function(self, jit) -> int:
        """Captures a JIT function (and, recursively, what it uses); returns its index."""
        key = id(jit)
        if key in self.index:
            return self.index[key]
        JITFunction, _ = _jit_kinds()
        number = len(self.functions)
        self.index[key] = number
        entry = {
            "kind": "jit" if isinstance(jit, JITFunction) else "constexpr_function",
            "name": jit.fn.__name__,
            "module": jit.fn.__module__,
            "qualname": jit.fn.__qualname__,
            "source": jit.src,
            "line": jit.starting_line_number,
            "file": jit.fn.__code__.co_filename,
            "scope": {},
        }
        if entry["kind"] == "jit":
            entry["options"] = {
                "do_not_specialize": list(jit.do_not_specialize),
                "do_not_specialize_on_alignment": list(jit.do_not_specialize_on_alignment),
                "debug": jit.debug,
                "noinline": jit.noinline,
            }
        self.functions.append(entry)
        for name in sorted(_free_names(jit.fn.__name__, jit.src)):
            value = _lookup(jit.fn, name)
            if value is not _MISSING:
                entry["scope"][name] = self.value(value, name, jit)
        return number

    def value(self, value: Any, name: str, owner) -> dict:
        JITFunction, ConstexprFunction = _jit_kinds()
        kinds = tuple(k for k in (JITFunction, ConstexprFunction) if k is not None)
        if isinstance(value, kinds):
            return {"function": self.function(value)}
        if isinstance(value, types.ModuleType):
            return {"module": value.__name__}
        inner = getattr(value, "fn", None)
        if isinstance(inner, kinds) and not isinstance(value, kinds):
            return {"function": self.function(inner)}  # a helper wrapped by a decorator
        from triton.language import constexpr

        if _is_array(value.value if isinstance(value, constexpr) else value):
            raise CaptureError(
                f"{owner.fn.__name__} reads '{name}' ({type(value).__name__}), an array from its module or closure; "
                f"arrays are never sent to compile workers: pass '{name}' to {owner.fn.__name__} as an argument"
            )
        module_name = getattr(value, "__module__", None)
        qualname = getattr(value, "__qualname__", None)
        if (callable(value) or isinstance(value, type)) and qualname is not None:
            if _importable(module_name, qualname, value):
                return {"import": [module_name, qualname]}
            raise CaptureError(
                f"{owner.fn.__name__} uses '{name}' ({value!r}), defined in {module_name}, which compile workers "
                "cannot import; define it in an importable module or make it a @triton.jit function"
            )
        try:
            return {"pickle": base64.b64encode(pickle.dumps(value)).decode()}
        except Exception as error:
            raise CaptureError(
                f"{owner.fn.__name__} uses '{name}' ({type(value).__name__}), which cannot be sent to compile "
                f"workers: {error}"
            ) from None


def capture(jit) -> dict:
    """The kernel ``jit`` (a ``JITFunction``) and everything its source uses, as JSON data."""
    state = _Capture()
    root = state.function(jit)
    return {"root": root, "functions": state.functions}


def _define(entry: dict, number: int):
    """Executes one function's source in a fresh namespace; returns the plain function and
    its namespace. The source is registered with linecache under a name of its own, at its
    original line, so that Triton can read it back and errors point at the user's line."""
    filename = f"<kerntune {entry['file']}#{number}>"
    padding = "\n" * max(entry["line"] - 1, 0)
    text = padding + entry["source"]
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace = {"__name__": entry["module"], "__builtins__": builtins}
    return namespace, compile(text, filename, "exec")


def _decode(value: dict, functions: list):
    if "function" in value:
        return functions[value["function"]]
    if "module" in value:
        return importlib.import_module(value["module"])
    if "import" in value:
        found = importlib.import_module(value["import"][0])
        for part in value["import"][1].split("."):
            found = getattr(found, part)
        return found
    return pickle.loads(base64.b64decode(value["pickle"]))


def rebuild(captured: dict):
    """The ``JITFunction`` that ``capture`` described, built without importing the module
    it was defined in."""
    import triton

    entries = captured["functions"]
    prepared = [_define(entry, number) for number, entry in enumerate(entries)]
    # Values other than functions first: a function's annotations and defaults are
    # evaluated when its source runs.
    for (namespace, _), entry in zip(prepared, entries):
        for name, value in entry["scope"].items():
            if "function" not in value:
                namespace[name] = _decode(value, [])
    # Placeholders for the helpers, replaced by the real objects below: names in a kernel
    # body are only looked up when Triton compiles it.
    functions = []
    for (namespace, code), entry in zip(prepared, entries):
        exec(code, namespace)
        plain = namespace[entry["name"]]
        if entry["kind"] == "jit":
            functions.append(triton.jit(plain, **entry["options"]))
        else:
            functions.append(triton.constexpr_function(plain))
    for number, ((namespace, _), entry) in enumerate(zip(prepared, entries)):
        for name, value in entry["scope"].items():
            if "function" in value:
                namespace[name] = functions[value["function"]]
        namespace[entry["name"]] = functions[number]
    return functions[captured["root"]]
