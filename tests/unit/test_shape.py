"""The shape of the tree, and what docs/architecture.md says of it.

The size rules: no class under ``liminal/`` longer than ``MAX_CLASS_LINES`` lines (from its
``class`` line, decorators aside, to its last line) and no function or method with more than
``MAX_PARAMETERS`` parameters. A parameter is every name a caller can pass: positional-only,
ordinary and keyword-only parameters count one each, so do ``*args`` and ``**kwargs``; the
``self`` or ``cls`` of a method does not. A class or function may pass a rule only where
docs/architecture.md, "Exceptions to the size rules", names it and says why; this test reads
that list, so the two cannot drift: an offender the list does not name fails, and so does a
name on the list that no longer offends (or no longer exists).

The figures: what docs/architecture.md states of the tree (how many files ``liminal/`` has, the
router's bound in lines and its number of rules, the module table's paths, every Python file it
names) is measured here against the tree.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "liminal"
DOC = ROOT / "docs" / "architecture.md"
EXCEPTIONS_HEADING = "## Exceptions to the size rules"

MAX_CLASS_LINES = 400
MAX_PARAMETERS = 8


@dataclass(frozen=True, order=True)
class Offence:
    name: str  # "liminal/path.py::Qualified.name", as the doc's list spells it
    what: str  # what it measures, against the bound

    def __str__(self) -> str:
        return f"{self.name}: {self.what}"


def parameters(args: ast.arguments, method: bool) -> int:
    names = [a.arg for a in (*args.posonlyargs, *args.args)]
    own = 1 if method and names and names[0] in ("self", "cls") else 0
    return (len(names) - own + len(args.kwonlyargs)
            + (args.vararg is not None) + (args.kwarg is not None))


def offences(path: Path, root: Path = ROOT) -> list[Offence]:
    """Every class over the line bound and every function over the parameter bound in one file,
    named by their path from ``root`` and qualified name (``Class.method``, ``outer.inner``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = path.relative_to(root).as_posix()
    found: list[Offence] = []

    def walk(node: ast.AST, prefix: str, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = prefix + child.name
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                if lines > MAX_CLASS_LINES:
                    found.append(Offence(f"{where}::{name}", f"class of {lines} lines (at most {MAX_CLASS_LINES})"))
                walk(child, name + ".", True)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                count = parameters(child.args, in_class)
                if count > MAX_PARAMETERS:
                    found.append(Offence(f"{where}::{name}",
                                         f"function of {count} parameters (at most {MAX_PARAMETERS})"))
                walk(child, name + ".", False)
            else:
                walk(child, prefix, in_class)

    walk(tree, "", False)
    return found


def section(heading: str) -> str:
    """The text of one ``## `` section of the doc, its heading line excluded."""
    text = DOC.read_text(encoding="utf-8")
    assert text.count(heading + "\n") == 1, f"docs/architecture.md has no single section {heading!r}"
    body = text.split(heading + "\n", 1)[1]
    return re.split(r"^## ", body, maxsplit=1, flags=re.MULTILINE)[0]


def documented_exceptions() -> dict[str, str]:
    """The doc's exceptions: each a list item "- `liminal/path.py::Name`: why"."""
    named: dict[str, str] = {}
    for match in re.finditer(r"^- `(liminal/[^`:]+::[\w.]+)`:\s*(.*)$", section(EXCEPTIONS_HEADING), re.MULTILINE):
        assert match[1] not in named, f"{match[1]} is named twice"
        assert match[2].strip(), f"{match[1]} is named without a reason"
        named[match[1]] = match[2]
    return named


def every_offence() -> list[Offence]:
    return sorted(o for path in sorted(PACKAGE.rglob("*.py")) for o in offences(path))


def test_no_class_over_400_lines_and_no_function_over_8_parameters_but_the_documented() -> None:
    allowed = documented_exceptions()
    unexplained = [str(o) for o in every_offence() if o.name not in allowed]
    assert not unexplained, (
        "past the size rules, and not named in docs/architecture.md, "
        f"{EXCEPTIONS_HEADING[3:]!r} (split the class, or pass a record):\n  " + "\n  ".join(unexplained))


def test_every_documented_exception_still_needs_to_be_one() -> None:
    offending = {o.name for o in every_offence()}
    stale = sorted(set(documented_exceptions()) - offending)
    assert not stale, ("named in docs/architecture.md's exceptions to the size rules but within them "
                       "(or gone): take them off the list:\n  " + "\n  ".join(stale))


def test_the_measure_counts_what_a_caller_can_pass(tmp_path: Path) -> None:
    source = tmp_path / "liminal_sample.py"
    source.write_text(
        "def nine(a, b, /, c, d, *args, e, f, g, **kw): ...\n"
        "def eight(a, b, c, d, e, f, g, h): ...\n"
        "class C:\n"
        "    def method(self, a, b, c, d, e, f, g, h): ...\n"
        "    @classmethod\n"
        "    def made(cls, a, b, c, d, e, f, g, h, i): ...\n"
        "    class Inner:\n"
        "        def inner(self, *, a, b, c, d, e, f, g, h, i): ...\n"
        "def outer():\n"
        "    def nested(a, b, c, d, e, f, g, h, i): ...\n"
        + "class Long:\n" + "    x = 1\n" * 400)
    found = {o.name.split("::")[1]: o.what for o in offences(source, tmp_path)}
    assert set(found) == {"nine", "C.made", "C.Inner.inner", "outer.nested", "Long"}
    assert found["nine"].startswith("function of 9 parameters")
    assert found["Long"].startswith("class of 401 lines")


# -- the figures docs/architecture.md states -----------------------------------------------------

def stated(pattern: str) -> re.Match[str]:
    """The one place the doc states a figure; it must state it exactly once."""
    found = list(re.finditer(pattern, DOC.read_text(encoding="utf-8")))
    assert len(found) == 1, f"docs/architecture.md states {pattern!r} {len(found)} times, not once"
    return found[0]


def test_the_file_count_is_the_trees() -> None:
    files = sum(1 for _ in PACKAGE.rglob("*.py"))
    said = int(stated(r"`liminal/` has (\d+) Python files")[1])
    assert said == files, f"docs/architecture.md says liminal/ has {said} Python files; it has {files}"


def test_the_router_is_as_long_and_has_as_many_rules_as_the_doc_says() -> None:
    router = PACKAGE / "acp" / "router.py"
    bound = int(stated(r"`router\.py` \(at most (\d+) lines\)")[1])
    rules = int(stated(r"holds its (\d+) rules at its top")[1])
    lines = len(router.read_text(encoding="utf-8").splitlines())
    assert lines <= bound, f"liminal/acp/router.py has {lines} lines; docs/architecture.md says at most {bound}"
    docstring = ast.get_docstring(ast.parse(router.read_text(encoding="utf-8"))) or ""
    numbered = [int(n) for n in re.findall(r"^(\d+)\. \*\*", docstring, re.MULTILINE)]
    assert numbered == list(range(1, len(numbered) + 1)), f"the router's rules are numbered {numbered}"
    assert len(numbered) == rules, (
        f"the router's docstring has {len(numbered)} rules; docs/architecture.md says {rules}")


def test_the_module_table_names_paths_that_exist() -> None:
    table = section("## Layers")
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert rows, "the module table has no rows"
    missing = []
    for row in rows:
        first = row.split("|")[1]
        names = re.findall(r"`([^`]+)`", first)
        assert names, row
        folder = ""
        for name in names:
            # "`liminal/kernel/reopen.py`, `restore.py`": a bare name is beside the first.
            if "/" in name.rstrip("/"):
                folder = name.rsplit("/", 1)[0] if name.endswith(".py") else ""
                path = ROOT / name
            else:
                path = ROOT / folder / name
            if not path.exists():
                missing.append(path.relative_to(ROOT).as_posix())
    assert not missing, "docs/architecture.md's module table names paths that do not exist: " + ", ".join(missing)


def test_every_python_path_the_doc_names_exists() -> None:
    """Every ``liminal/...py`` the doc names, anywhere in it, and every backticked ``a/b.py`` (a path
    from the checkout, or from ``liminal/`` as the doc's shorter names are), is a file."""
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"\bliminal/[\w/]+\.py\b", text))
    missing = sorted(path for path in named if not (ROOT / path).is_file())
    for path in set(re.findall(r"`([\w]+/[\w/]+\.py)", text)) - named:
        if not (ROOT / path).is_file() and not (PACKAGE / path).is_file():
            missing.append(path)
    assert not missing, "docs/architecture.md names Python files that do not exist: " + ", ".join(sorted(missing))
