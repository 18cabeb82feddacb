"""Read the docs as the tests need them: Python snippets (with their markers) and cited repo paths.

Snippet markers (an HTML comment on the line right above the opening fence; CONTRIBUTING.md):

- none: the block is a whole program; it is run and type-checked alone;
- ``<!-- snippet: continues -->``: the block continues the previous Python block of the same
  file; the two (or more) together are run and type-checked;
- ``<!-- snippet: fragment -->``: shown only (it leaves out parts with ``...``); it must still
  parse. Kept to a handful (``MAX_FRAGMENTS``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "dra_constructs"
MAX_FRAGMENTS = 2

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*snippet:\s*(\w+)\s*-->\s*$")
MARKERS = ("continues", "fragment")


def doc_files() -> list[Path]:
    """README.md, CONTRIBUTING.md and every docs/*.md."""
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [f for f in files if f.is_file()]


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Block:
    """One fenced code block: its file, the line of its first code line, language, marker, code."""

    doc: Path
    line: int
    lang: str
    marker: str | None
    code: str

    @property
    def where(self) -> str:
        return f"{rel(self.doc)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    """Every fenced block of ``doc``; a marker must name a known kind and precede a Python block."""
    lines = doc.read_text().splitlines()
    out: list[Block] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        start = index + 1
        end = next((i for i in range(start, len(lines)) if lines[i].startswith("```")), len(lines))
        above = lines[index - 1] if index else ""
        marker_match = _MARKER.match(above)
        marker = marker_match.group(1) if marker_match else None
        if marker is not None and marker not in MARKERS:
            raise AssertionError(f"{rel(doc)}:{index}: unknown snippet marker {marker!r} (use one of {MARKERS})")
        if marker is not None and match.group(1) != "python":
            raise AssertionError(f"{rel(doc)}:{index}: a snippet marker stands above a {match.group(1) or 'plain'} "
                                 "block; markers apply to ```python blocks only")
        out.append(Block(doc, start + 1, match.group(1), marker, "\n".join(lines[start:end]) + "\n"))
        index = end + 1
    return out


@dataclass
class Program:
    """Python blocks run as one program: the first block and the ``continues`` blocks after it."""

    parts: list[Block] = field(default_factory=list)

    @property
    def first(self) -> Block:
        return self.parts[0]

    @property
    def name(self) -> str:
        return f"{rel(self.first.doc)}:{self.first.line}" + "".join(f"+{p.line}" for p in self.parts[1:])

    @property
    def code(self) -> str:
        return "".join(p.code for p in self.parts)

    def doc_line(self, program_line: int) -> str:
        """``file:line`` in the docs of line ``program_line`` (1-based) of :attr:`code`."""
        offset = program_line
        for part in self.parts:
            count = part.code.count("\n")
            if offset <= count:
                return f"{rel(part.doc)}:{part.line + offset - 1}"
            offset -= count
        return f"{rel(self.parts[-1].doc)}:{self.parts[-1].line}"


def python_blocks() -> list[Block]:
    return [b for doc in doc_files() for b in blocks(doc) if b.lang == "python"]


def programs() -> list[Program]:
    """Every runnable program of the docs: each unmarked block, and each chain with its continuations."""
    out: list[Program] = []
    chain: Program | None = None
    for block in python_blocks():
        if block.marker == "fragment":
            continue
        if block.marker == "continues":
            if chain is None or chain.first.doc != block.doc:
                raise AssertionError(f"{block.where}: 'snippet: continues' with no runnable Python block before it "
                                     "in the same file")
            chain = Program([*chain.parts, block])
        else:
            chain = Program([block])
        out.append(chain)
    return out


# --- cited paths -------------------------------------------------------------------------------

#: Top-level folders and files of the repository that docs cite from the root.
ROOT_PREFIXES = ("src/", "docs/", "tests/", "scripts/", "images/", "examples/", "benchmarks/", "imports/", "dist/",
                 ".ci/")
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_PLAIN = re.compile(r"(?<![\w./`-])((?:" + "|".join(re.escape(p) for p in ROOT_PREFIXES)
                    + r")[\w./*<>-]*[\w/*>])")
_PATHLIKE = re.compile(r"^[\w.*-]+(?:/[\w.*<>-]+)*/?$")
_SUFFIXES = (".py", ".md", ".c", ".h", ".yaml", ".yml", ".json", ".toml", ".txt", ".js", "Dockerfile")


@dataclass(frozen=True)
class Citation:
    doc: Path
    line: int
    path: str

    @property
    def where(self) -> str:
        return f"{rel(self.doc)}:{self.line}"


def _cited_path(text: str) -> str | None:
    """``text`` (a backticked span or a plain token) as a repo path, or ``None`` if it is not one."""
    text = text.strip().split("::")[0].rstrip(".,;:)")  # pytest ids: tests/x.py::test_y
    if text.startswith(("../", "shared/", "/", "~")) or "://" in text:
        return None
    if text.startswith(ROOT_PREFIXES):
        return text
    if "/" not in text or not _PATHLIKE.match(text):
        return None
    if re.fullmatch(r"[a-z_]+/", text):  # a package folder: ``catalog/``, ``rules/`` (not ``example.com/``)
        return text
    # A module path relative to the package (``agent/kube.py``, ``catalog/``): .py files and folders
    # whose first part is (or was) a package folder. Other repositories' paths (``cmd/...go``) are not ours.
    first = text.split("/")[0]
    if text.endswith(".py") or (text.endswith("/") and (PACKAGE / first).is_dir()):
        return text
    if (PACKAGE / first).is_dir() and text.endswith(_SUFFIXES):
        return text
    return None


def citations(doc: Path) -> list[Citation]:
    """Repo paths cited in ``doc``: backticked spans and plain ``docs/...``-style tokens, outside code blocks."""
    out: list[Citation] = []
    in_code = False
    for number, line in enumerate(doc.read_text().splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        seen: set[str] = set()
        for span in _BACKTICKED.findall(line):
            path = _cited_path(span)
            if path is not None and path not in seen:
                seen.add(path)
                out.append(Citation(doc, number, path))
        for token in _PLAIN.findall(_BACKTICKED.sub("", line)):
            path = _cited_path(token)
            if path is not None and path not in seen:
                seen.add(path)
                out.append(Citation(doc, number, path))
    return out


def _tracked_files() -> list[str]:
    return [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*")
            if p.is_file() and not any(part in (".git", ".venv", "node_modules", "__pycache__")
                                       for part in p.relative_to(ROOT).parts)]


def resolve(path: str, files: list[str] | None = None) -> bool:
    """Whether cited ``path`` exists: from the root for root prefixes, else as a package-relative module
    path (``agent/kube.py`` is ``src/dra_constructs/agent/kube.py``) or the tail of a repo file's path
    (``backends/nvml.py``, ``standin/tenant.py`` next to a test). ``*`` globs must match something;
    ``<placeholder>`` parts match any name."""
    pattern = re.sub(r"<[^>]+>", "*", path).rstrip("/")
    if path.startswith(ROOT_PREFIXES):
        return any(ROOT.glob(pattern)) if "*" in pattern else (ROOT / pattern).exists()
    if (PACKAGE / pattern).exists() or ("*" in pattern and any(PACKAGE.glob(pattern))):
        return True
    regex = re.compile(r"(^|/)" + re.escape(pattern).replace(r"\*", r"[^/]*") + r"(/|$)")
    return any(regex.search(f) for f in (files if files is not None else _tracked_files()))


_DOTTED = re.compile(r"`(dra_constructs(?:\.\w+)+)(?:\(\))?`")


def dotted_names(doc: Path) -> list[Citation]:
    """Backticked ``dra_constructs.x.y`` names (modules, classes, functions) cited in ``doc``."""
    return [Citation(doc, number, name) for number, line in enumerate(doc.read_text().splitlines(), 1)
            for name in _DOTTED.findall(line)]


def importable(name: str) -> bool:
    """Whether ``name`` is a module or an attribute of one (``dra_constructs.cel.check``)."""
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False
