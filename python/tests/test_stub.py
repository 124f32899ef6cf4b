"""varlog/_varlog.pyi against the extension, so that the two cannot drift apart.

The extension's methods are C functions without __text_signature__; each documents its
signature on its docstring's first line ("append(records, timeout=None, *, future=True) ->
..."), and the class docstrings of Client, Admin and Server document __init__'s. So:
  1. every name the stub declares exists at runtime (module functions, classes, methods,
     properties, the protocol dunders);
  2. every public name a class defines at runtime (not inherited from a Python base such as
     concurrent.futures.Future) and every public module function is in the stub;
  3. each method's parameters in the stub (names, order, kind: positional, keyword-only,
     positional-only, *args, **kwargs; and which have defaults) equal its docstring's;
  4. the docstring is the C function's truth: every parameter it names is accepted as a
     keyword by the method itself (probed on closed handles, which parse their arguments and
     then raise Closed, so nothing runs), and a name it does not have is refused."""

import ast
import inspect
import os

import pytest

import varlog
from varlog import _varlog

STUB = os.path.join(os.path.dirname(_varlog.__file__), "_varlog.pyi")
PROTOCOL = {"__init__", "__enter__", "__exit__", "__iter__", "__next__", "__aiter__",
            "__anext__", "__await__"}
STRUCTSEQ = {"n_fields", "n_sequence_fields", "n_unnamed_fields"}


def stub_tree():
    with open(STUB) as f:
        return ast.parse(f.read(), STUB)


def params(args, skip_self):
    """[(name, kind, has_default)] of an ast.arguments."""
    out = []
    pos = list(args.posonlyargs) + list(args.args)
    ndef = len(args.defaults)
    for i, a in enumerate(pos):
        kind = "posonly" if i < len(args.posonlyargs) else "pos"
        out.append((a.arg, kind, i >= len(pos) - ndef))
    if args.vararg:
        out.append((args.vararg.arg, "*", False))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append((a.arg, "kwonly", d is not None))
    if args.kwarg:
        out.append((args.kwarg.arg, "**", False))
    if skip_self and out and out[0][0] == "self":
        out = out[1:]
    return out


def doc_params(doc, name):
    """The parameters of the signature on a docstring's first line, or None without one."""
    first = (doc or "").split("\n", 1)[0]
    if not first.startswith(name + "("):
        return None
    depth, end = 0, None
    for i, ch in enumerate(first):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch == ")":
            end = i
            break
    fn = ast.parse("def f(%s): pass" % first[len(name) + 1:end]).body[0]
    return params(fn.args, skip_self=False)


def stub_decls():
    """{class name or None (module): {name: [FunctionDef, ...] | "property"}} of the stub."""
    decls = {None: {}}
    for node in stub_tree().body:
        if isinstance(node, ast.FunctionDef):
            decls[None].setdefault(node.name, []).append(node)
        elif isinstance(node, ast.ClassDef):
            members = decls.setdefault(node.name, {})
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    if any(isinstance(d, ast.Name) and d.id == "property"
                           for d in item.decorator_list):
                        members[item.name] = "property"
                    else:
                        members.setdefault(item.name, []).append(item)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            decls[None][node.target.id] = "attribute"
    return decls


def is_overload(fn):
    return any(isinstance(d, ast.Name) and d.id == "overload" for d in fn.decorator_list)


def own_public(cls):
    """Public names cls defines itself, not inherited from a base class."""
    bases = cls.__mro__[1:]
    return {n for n in vars(cls)
            if (not n.startswith("_") or n in PROTOCOL) and n not in STRUCTSEQ
            and not any(n in vars(b) for b in bases if b is not object)}


def test_stub_declares_what_the_runtime_has_and_nothing_else():
    decls = stub_decls()
    runtime_mod = {n for n in vars(_varlog) if not n.startswith("__")}
    stub_mod = set(decls[None]) | {c for c in decls if c}
    # names of the stub that exist nowhere, and runtime names the stub lacks
    assert stub_mod - runtime_mod == set()
    assert runtime_mod - stub_mod == set()
    for cname, members in decls.items():
        if cname is None:
            continue
        cls = getattr(_varlog, cname)
        for name, kind in members.items():
            assert hasattr(cls, name), "%s.%s is in the stub, not at runtime" % (cname, name)
            if kind == "property":
                attr = inspect.getattr_static(cls, name)
                assert inspect.isdatadescriptor(attr), "%s.%s is not a property" % (cname, name)
        missing = {n for n in own_public(cls) if n not in members and n != "__init__"}
        assert missing == set(), "%s defines %s, which the stub lacks" % (cname, missing)


def runtime_doc(cls, name):
    if name == "__init__":
        return doc_params(cls.__doc__, cls.__name__)
    return doc_params(getattr(cls, name).__doc__, name)


def test_stub_signatures_equal_the_documented_ones():
    decls = stub_decls()
    checked = 0
    for fname, fns in decls[None].items():
        if fns == "attribute":
            continue
        doc = doc_params(getattr(_varlog, fname).__doc__, fname)
        assert doc is not None, "%s has no signature on its docstring's first line" % fname
        for fn in fns:
            assert params(fn.args, skip_self=False) == doc, fname
            checked += 1
    for cname, members in decls.items():
        if cname is None:
            continue
        cls = getattr(_varlog, cname)
        for name, fns in members.items():
            if fns == "property" or (name in PROTOCOL and name != "__init__"):
                continue
            if name == "__init__" and cname == "AppendFuture":
                continue  # takes nothing; its type's doc is prose
            doc = runtime_doc(cls, name)
            assert doc is not None, "%s.%s: no signature on its docstring's first line" % (
                cname, name)
            for fn in fns:
                got = params(fn.args, skip_self=True)
                if is_overload(fn):  # an overload may narrow a default away (Literal[False])
                    got, want = [p[:2] for p in got], [p[:2] for p in doc]
                else:
                    want = doc
                assert got == want, "%s.%s: stub %s, runtime %s" % (cname, name, got, want)
                checked += 1
    assert checked > 60


@pytest.fixture
def closed_handles(server):
    c = varlog.Client(server.address)
    app = c.appender(1)
    sub = c.subscribe(1, 1)
    hsub = c.subscribe(1, 1, handler=lambda e: None)
    c.close()
    adm = varlog.Admin(server.address)
    adm.close()
    srv = varlog.Server()
    srv.close()
    fut = varlog.AppendFuture()
    fut.set_result(None)
    return {"Client": c, "Appender": app, "Subscription": sub, "Admin": adm, "Server": srv,
            "AppendFuture": fut, "_hsub": hsub}


# A value of the right type for each parameter name the extension's methods use.
SAMPLE = {"topic": 1, "log_stream": 1, "begin": 1, "end": None, "timeout": None,
          "records": b"x", "until_glsn": 1, "last_glsn": 1, "storage_node": 1,
          "method": "/varlog.snpb.LogIO/Append", "code": 14, "message": None, "n": 1, "k": 1,
          "ms": 0, "appendable": False, "handler": None, "future": True}


def call_with(meth, kwargs):
    """None when meth(**kwargs) parsed its arguments (it raises Closed, or anything but a
    TypeError, or returns), else the TypeError's text."""
    try:
        meth(**kwargs)
    except TypeError as e:
        return str(e)
    except Exception:
        pass
    return None


def test_documented_parameters_are_the_c_functions(closed_handles):
    probed = 0
    for cname, obj in closed_handles.items():
        if cname.startswith("_"):
            continue
        cls = type(obj)
        for name in sorted(own_public(cls)):
            if name in PROTOCOL or not callable(getattr(cls, name)):
                continue
            doc = runtime_doc(cls, name)
            meth = getattr(obj, name)
            kwargs = {p: SAMPLE[p] for p, kind, _ in doc if kind in ("pos", "kwonly")}
            posonly = [p for p, kind, _ in doc if kind == "posonly"]
            if posonly:  # METH_O, METH_VARARGS: refuses keywords
                err = call_with(meth, {posonly[0]: SAMPLE.get(posonly[0], 1)})
                assert err is not None and "keyword" in err, "%s.%s: %s" % (cname, name, err)
                continue
            # every documented name, as a keyword, is taken (a wrong one: invalid keyword,
            # or the real one missing)
            err = call_with(meth, kwargs)
            assert err is None, "%s.%s(**%r): %s" % (cname, name, kwargs, err)
            # and a name it does not document is refused
            err = call_with(meth, dict(kwargs, no_such_parameter=1))
            assert err is not None and "keyword" in err, "%s.%s: %s" % (cname, name, err)
            probed += 1
    assert probed > 40
