"""Read an audit's inputs object by object, keeping only what the rules need of each (issue 25).

``dra-constructs audit`` of a cluster export holds, at most, one file's text (YAML, or JSON in
a layout the item reader cannot split), one item (or batch of YAML items) being parsed, and the
:class:`Collector`'s compact set: every object that is the first of its shape (``shape_key``) or of a kind that is
not memoized, and for each later object of a known shape a *slim* copy - its own ``apiVersion``,
``kind`` and ``metadata`` (``managedFields`` left out) over the first object's other top-level
fields (``status`` left out). The shape key holds every field outside those that a rule reads,
so rules read the same from the slim copy as from the object (``tests/guardrails/test_stream.py``
compares streamed and whole audits on a mixed corpus). ``kubectl get -o json`` files (``.json``
and stdin) are split into items by :mod:`dra_constructs._json_stream` and parsed one at a time;
stdin is first copied to a temporary file (within the total limit) so that it can be split, and
read whole where it cannot. A YAML ``*List`` document (``kubectl get -o yaml``) is read a batch of
items at a time by :mod:`dra_constructs._yaml_items` (its text is held, its objects are not all
composed at once). A file that fails (or cannot be split) part-way is taken back from the
collector and read whole, which reports errors exactly as before.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from dra_constructs._io import ReadBudget, decode_text, read_input
from dra_constructs._json_stream import Chunk, NotStreamable, list_chunks, parse_item, parse_items
from dra_constructs._progress import Progress
from dra_constructs._safe_load import no_gc
from dra_constructs._yaml_items import NotPlain, plain_list
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.facets import note_facets_from_text
from dra_constructs.guardrails.like_items import Likeness
from dra_constructs.guardrails.loader import (
    STDIN,
    STDIN_NAME,
    ManifestSink,
    _load_text_into,
    _objects,
    each_input,
)
from dra_constructs.guardrails.manifest import Manifest, PodView, _Discovered, as_dict
from dra_constructs.guardrails.shape import metadata_only_ok
from dra_constructs.guardrails.shape_key import MEMOIZED_KINDS, shape_key
from dra_constructs.guardrails.skipped import SkippedInput, unauditable

__all__ = ["Collector", "stream_paths"]

_FIELD, _EXPECTED = "document", "Kubernetes manifest (UTF-8 YAML or JSON)"
#: Bytes of stdin copied at a time.
_SPOOL_BLOCK = 1 << 20
#: ``metadata`` fields a slim copy leaves out (no rule reads them; kubectl exports carry kilobytes of them).
_SLIM_METADATA_DROPPED = frozenset({"managedFields"})


class Collector:
    """A :class:`~.loader.ManifestSink` keeping the compact set described in the module docstring.

    ``manifests`` are in input order with their ``position``; later objects of a shape share the
    first one's fields (``memoize=False``: every object is kept whole).
    """

    def __init__(self, memoize: bool = True) -> None:
        self.manifests: list[Manifest] = []
        self.memoize = memoize
        self._first: dict[bytes, Manifest] = {}
        self._keys: list[bytes] = []  # shapes in the order they were first seen (for rollback)

    def add(self, manifest: Manifest) -> None:
        manifest.position = len(self.manifests)
        key = None
        if self.memoize:
            key = manifest.shape if manifest.shape is not None else shape_key(manifest)
            manifest.shape = key
        first = self._first.get(key) if key is not None else None
        if first is None:
            if key is not None:
                self._first[key] = manifest
                self._keys.append(key)
            self.manifests.append(manifest)
        else:
            self.manifests.append(_slim(manifest, first))

    def add_like(self, metadata: dict[str, Any], shape: bytes, file: str, line: int,
                 span: tuple[int, int]) -> None:
        """An object of a known ``shape`` given by its ``metadata`` alone (``managedFields`` left out):
        an item read from its text by :mod:`.like_items`, equal to a parsed one outside ``metadata``
        (and the fields its shape key leaves out). The same slim copy :meth:`add` makes of it."""
        slim = _slim_prototype(self._first[shape])
        obj = slim.skeleton.copy()  # (its keys in the first object's order, ``metadata`` at its place)
        obj["metadata"] = metadata
        self.manifests.append(slim.make(obj, metadata, file, line, len(self.manifests), span))

    def mark(self) -> tuple[int, int]:
        return len(self.manifests), len(self._keys)

    def rollback(self, mark: tuple[int, int]) -> None:
        objects, keys = mark
        for key in self._keys[keys:]:
            del self._first[key]
        del self._keys[keys:], self.manifests[objects:]


def _slim(manifest: Manifest, first: Manifest) -> Manifest:
    """``manifest`` with its identity and the fields of ``first`` (same shape key) otherwise."""
    obj: dict[str, Any] = {}
    first_obj = first.obj
    for key, value in manifest.obj.items():
        if key == "metadata" and isinstance(value, dict) and not _SLIM_METADATA_DROPPED.isdisjoint(value):
            obj[key] = {k: v for k, v in value.items() if k not in _SLIM_METADATA_DROPPED}
        elif key in _OWN:
            obj[key] = value
        elif key != "status":
            obj[key] = first_obj[key]
    return _slim_of(obj, first, manifest.file, manifest.line, manifest.position, manifest.span)


def _slim_of(obj: dict[str, Any], first: Manifest, file: str | None, line: int | None, position: int,
             span: tuple[int, int] | None) -> Manifest:
    """The slim copy holding ``obj`` (its own ``metadata``, ``first``'s other fields, no ``status``)."""
    return _slim_prototype(first).make(obj, as_dict(obj.get("metadata")), file, line, position, span)


#: Top-level fields a slim copy keeps of its own object (``metadata`` as well).
_OWN = frozenset({"apiVersion", "kind", "metadata"})
#: Cached properties of a :class:`Manifest` that read only fields its shape key holds.
_SHARED = ("api_version", "kind", "group", "version", "namespace", "display_namespace")
#: Where the first object of a shape keeps its :class:`_SlimPrototype` (in its ``__dict__``).
_PROTOTYPE_KEY = "_stream_slim"
#: :class:`Manifest` fields made by a factory (each slim copy gets its own).
_FACTORIES = tuple((f.name, f.default_factory) for f in dataclasses.fields(Manifest)
                   if f.default_factory is not dataclasses.MISSING)


def _slim_prototype(first: Manifest) -> _SlimPrototype:
    cached = first.__dict__
    prototype: _SlimPrototype | None = cached.get(_PROTOTYPE_KEY)
    if prototype is None:
        prototype = cached[_PROTOTYPE_KEY] = _SlimPrototype(first)
    return prototype


class _SlimPrototype:
    """What the slim copies of one shape share, computed once from its first object: every
    :class:`Manifest` attribute but the object's own (its ``obj``, file, line, position, span and
    ``metadata``), the cached properties that read fields in the key only, and its pod views.

    A copy is made without the dataclass's ``__init__`` (a ``__dict__`` update: the same
    attributes ``Manifest(obj, file=..., shape=first.shape)`` and those cached properties give).
    """

    def __init__(self, first: Manifest) -> None:
        #: its top-level fields without ``status`` (a like item's slim copy is these with its own ``metadata``)
        self.skeleton = {k: v for k, v in first.obj.items() if k != "status"}
        base = Manifest(first.obj, shape=first.shape).__dict__  # (one key object per shape: a key is kilobytes)
        self.attributes: dict[str, Any] = {k: v for k, v in base.items() if k not in _OWN_ATTRIBUTES}
        self.attributes.update({name: getattr(first, name) for name in _SHARED})
        first.pods  # noqa: B018 - computes ``_discovered``
        discovered: _Discovered = first.__dict__["_discovered"]
        # a Pod's pod metadata is its own: its pod views are made again with the slim copy's
        self.own_pods = [{k: v for k, v in _pod_attributes(pod).items() if k != "metadata"}
                         for pod in discovered.pods] \
            if any(pod.metadata is first.metadata for pod in discovered.pods) else None
        if self.own_pods is None:
            self.attributes["_discovered"] = discovered  # pod templates: the same dicts
        self.loose, self.resources = discovered.loose, discovered.resources

    def make(self, obj: dict[str, Any], metadata: dict[str, Any], file: str | None, line: int | None,
             position: int, span: tuple[int, int] | None) -> Manifest:
        """The slim copy holding ``obj`` (``metadata``: ``obj``'s as :attr:`Manifest.metadata` reads it)."""
        known = self.attributes.copy()  # (a dict copy in C; the copy's ``__dict__`` is it)
        known["obj"], known["file"], known["line"], known["position"], known["span"] = obj, file, line, position, span
        known["metadata"] = metadata
        for name, factory in _FACTORIES:
            known[name] = factory()
        if self.own_pods is not None:
            own = _new(_Discovered)
            pods = []
            for attributes in self.own_pods:
                pod = _new(PodView)
                view = pod.__dict__
                view.update(attributes)
                view["metadata"] = metadata
                pods.append(pod)
            own.__dict__.update(pods=pods, loose=self.loose, resources=self.resources)
            known["_discovered"] = own
        slim = _new(Manifest)
        slim.__dict__ = known
        return slim


#: Attributes of a :class:`Manifest` that are each object's own.
_OWN_ATTRIBUTES = frozenset({"obj", "file", "line", "position", "span", "metadata", *(f for f, _ in _FACTORIES)})
_new = object.__new__


def _pod_attributes(pod: PodView) -> dict[str, Any]:
    """``pod``'s fields and listings (computed here once per shape): what a slim copy's view shares."""
    return {"spec": pod.spec, "path": pod.path, "metadata": pod.metadata, "metadata_path": pod.metadata_path,
            "_containers": pod._containers, "_main_containers": pod._main_containers, "_claims": pod._claims}


class _FileSink:
    """Forwards to the collector and notes kustomizations (a file of them is skipped, not audited)."""

    def __init__(self, sink: ManifestSink) -> None:
        self.sink = sink
        self.kustomizations: list[Manifest] = []

    def add(self, manifest: Manifest) -> None:
        if manifest.kind in ("Kustomization", "Component") and manifest.group == "kustomize.config.k8s.io":
            self.kustomizations.append(manifest)
        self.sink.add(manifest)

    def mark(self) -> Any:
        return self.sink.mark()

    def rollback(self, mark: Any) -> None:
        self.sink.rollback(mark)


def stream_paths(paths: Sequence[str], sink: ManifestSink, stdin: IO[str] | None = None, *,
                 skipped: list[SkippedInput] | None = None, errors: list[DraConstructsError] | None = None,
                 budget: ReadBudget | None = None, progress: Progress | None = None,
                 sources: dict[str, str] | None = None, spool_dir: str | None = None) -> None:
    """Every object of ``paths`` into ``sink``, as :func:`~.loader.load_paths` reads them.

    ``sources`` receives, for stdin, the temporary file holding its copy (in ``spool_dir``; the
    caller removes it), for locating findings afterwards. Skipped and malformed files as in
    :func:`~.skipped.load_or_skip`; unreadable ones (and inputs past ``budget``) raise.
    """
    budget = budget or ReadBudget.of(None)
    seen: dict[bytes, bytes] = {}  # shape keys of objects whose field types passed (each to itself)
    if progress is not None:
        progress.step("reading")
    with no_gc():
        for files, (source, file, is_json) in enumerate(each_input(paths, stdin), 1):
            if progress is not None:
                progress.update(files, unit="files")
            _load_file(source, file, is_json, _FileSink(sink), seen, stdin, budget, skipped, errors, sources,
                       spool_dir, progress)


def _load_file(source: Path | str, file: str, is_json: bool, sink: _FileSink, seen: dict[bytes, bytes],
               stdin: IO[str] | None, budget: ReadBudget, skipped: list[SkippedInput] | None,
               errors: list[DraConstructsError] | None, sources: dict[str, str] | None,
               spool_dir: str | None, progress: Progress | None) -> None:
    """One input into ``sink`` (or into ``skipped`` / ``errors``); a file that cannot be read raises."""
    mark = sink.mark()
    text, path = "", str(source)
    if source == STDIN:
        path = _spool(stdin, budget, spool_dir)
        if sources is not None:
            sources[file] = path
        streamed = _stream_json(path, file, sink, seen, ReadBudget.of(None), progress)
        if not streamed:
            text = decode_text(Path(path).read_bytes(), STDIN_NAME, _FIELD, _EXPECTED)
    else:
        streamed = is_json and _stream_json(str(source), file, sink, seen, budget, progress)
        if not streamed:
            text = read_input(source, _FIELD, _EXPECTED, budget=budget)
    try:
        if not streamed and not is_json:
            streamed = _stream_yaml(text, file, sink, seen, path, progress)
        if not streamed:
            _load_text_into(text, file, is_json, sink, seen)
    except DraConstructsError as error:
        sink.rollback(mark)
        skip = unauditable(file, text, None) if skipped is not None else None
        if skip is not None and skipped is not None:
            skipped.append(skip)
            return
        if errors is None:
            raise
        errors.append(error)
        return
    skip = unauditable(file, text, sink.kustomizations) if skipped is not None else None
    if skip is not None and skipped is not None:
        sink.rollback(mark)
        skipped.append(skip)


def _stream_yaml(text: str, file: str, sink: ManifestSink, seen: dict[bytes, bytes], path: str,
                 progress: Progress | None) -> bool:
    """The items of a YAML ``*List`` document one batch at a time (:mod:`dra_constructs._yaml_items`);
    ``False`` (nothing added) when the text must be read whole (another shape, or any error: the
    whole read reports it). Each object's span is its bytes in ``path`` (located later without the file)."""
    if text.lstrip()[:1] in ("{", "["):
        return False  # JSON (the loader's fast path), or YAML flow style
    mark = sink.mark()
    spans = _ByteSpans(text, path)
    try:
        for count, item in enumerate(plain_list(text, file, _FIELD), 1):
            if progress is not None and not count & 1023:
                progress.update(count, unit="objects")
            value = item.value
            if _a_list(value):
                raise NotPlain
            span = spans.of(item.start, item.end)
            for manifest in _objects(value, file, item.line, None, seen=seen):
                manifest.span = span
                sink.add(manifest)
        return True
    except (NotPlain, DraConstructsError):
        sink.rollback(mark)
        return False


class _ByteSpans:
    """Byte offsets in the file of character offsets in its text (after a byte order mark, in UTF-8)."""

    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.ascii = text.isascii()
        try:
            with open(path, "rb") as handle:
                self.base = len(_BOM) if handle.read(len(_BOM)) == _BOM else 0
        except OSError:
            self.base = 0
        self.chars = self.bytes = 0  # a position in both (items come in order)

    def of(self, start: int, end: int) -> tuple[int, int]:
        if self.ascii:
            return self.base + start, self.base + end
        if start < self.chars:
            self.chars = self.bytes = 0
        first = self.bytes + len(self.text[self.chars:start].encode("utf-8", "surrogatepass"))
        last = first + len(self.text[start:end].encode("utf-8", "surrogatepass"))
        self.chars, self.bytes = end, last
        return self.base + first, self.base + last


_BOM = b"\xef\xbb\xbf"


def _stream_json(path: str, file: str, sink: ManifestSink, seen: dict[bytes, bytes], budget: ReadBudget,
                 progress: Progress | None) -> bool:
    """The items of a ``kubectl -o json`` ``List`` one by one; ``False`` (nothing added, nothing spent)
    when the file must be read whole (another layout, or an error the whole read reports)."""
    mark, left = sink.mark(), budget.left
    # Items like one parsed before are read from their text (``like_items.py``): only a memoizing
    # collector, whose slim copies read nothing of an object but its ``metadata`` and its shape.
    target = sink.sink if isinstance(sink, _FileSink) else sink
    likeness = Likeness() if isinstance(target, Collector) and target.memoize else None
    target = target if isinstance(target, Collector) else Collector()  # (for the type checker: unused then)
    items = _Items(path, file, sink, seen, likeness)
    try:
        chunks = list_chunks(path, budget, likeness.match if likeness is not None else None)
        for count, chunk in enumerate(chunks, 1):
            if progress is not None and not count & 1023:
                progress.update(count, unit="objects")
            if likeness is not None:
                likeness.read(chunk.end - chunk.start)
            items.add(chunk, target)
        items.flush()
        return True
    except (NotStreamable, DraConstructsError):
        sink.rollback(mark)
        budget.left = left
        return False


#: The ``kind`` of an item as kubectl prints it (``apiVersion`` first, then ``kind``): it only
#: decides whether an item waits to be parsed with others (:class:`_Items`), not what it is.
_PRINTED_KIND = re.compile(rb'\{\s*"apiVersion": "[^"\\]*",\s*"kind": "([^"\\]*)"')
#: Items parsed together at most (count, bytes).
_BATCH_ITEMS, _BATCH_BYTES = 256, 1 << 20


class _Items:
    """Parses the items the splitter cut and adds their objects to the sink, in input order.

    Items of kinds no like-item template is learnt from (not in :data:`~.shape_key.MEMOIZED_KINDS`:
    ConfigMaps, Services, custom resources...) wait and are parsed together
    (:func:`~dra_constructs._json_stream.parse_items`: the same values and checks, a tenth of the
    calls), and so do items read like a template (their slim copies need no parse); any other
    item first adds those that wait, then is parsed alone and may be learnt as a template.
    """

    def __init__(self, path: str, file: str, sink: ManifestSink, seen: dict[bytes, bytes],
                 likeness: Likeness | None) -> None:
        self.path, self.file, self.sink, self.seen, self.likeness = path, file, sink, seen, likeness
        self.waiting: list[tuple[Chunk, Collector | None]] = []  # (the collector of a like item)
        self.parsed = 0  # items to parse among them
        self.size = 0

    def add(self, chunk: Chunk, collector: Collector) -> None:
        """One more item (``collector``: where a like item's slim copy goes)."""
        waiting = self.waiting
        if chunk.matched is not None:
            waiting.append((chunk, collector))
        else:
            printed = _PRINTED_KIND.match(chunk.data)
            kind = printed.group(1) if printed is not None else None
            if kind is None or kind in _TEMPLATE_KINDS or kind.endswith(b"List"):
                self.flush()
                self._add(parse_item(chunk.data, self.path, chunk.line), chunk)
                return
            self.parsed += 1
            self.size += len(chunk.data)
            waiting.append((chunk, None))
        if len(waiting) >= _BATCH_ITEMS or self.size >= _BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Parse and add the items that wait."""
        waiting = self.waiting
        if not waiting:
            return
        parsed = self.parsed
        self.waiting, self.parsed, self.size = [], 0, 0
        values = iter(parse_items([chunk.data for chunk, like in waiting if like is None]) or ()
                      if parsed > 1 else ())
        for chunk, like in waiting:
            if like is not None:
                shape, metadata = chunk.matched
                like.add_like(metadata, shape, self.file, chunk.line, (chunk.start, chunk.end))
            else:
                self._add(next(values, _NOT_PARSED), chunk)

    def _add(self, value: Any, chunk: Chunk) -> None:
        if value is _NOT_PARSED:
            value = parse_item(chunk.data, self.path, chunk.line)
        if _plain(value):  # (most of a cluster export: ConfigMaps, Services, custom kinds)
            manifest = Manifest(value, file=self.file, line=chunk.line, span=(chunk.start, chunk.end))
            note_facets_from_text(manifest, chunk.data)
            self.sink.add(manifest)
            return
        if _a_list(value):
            raise NotStreamable
        for manifest in _objects(value, self.file, chunk.line, None, seen=self.seen):
            manifest.span = (chunk.start, chunk.end)
            self.sink.add(manifest)
            if self.likeness is not None and manifest.obj is value:
                self.likeness.learn(chunk.data, manifest)


def _plain(value: Any) -> bool:
    """Whether ``value`` is one object that ``_objects`` checks in ``metadata`` alone and that has no
    shape key (nor is a template learnt from it): then it is that one ``Manifest``, with no other check.

    (Exact types only; anything else - another kind, a ``*List``, a problem - takes ``_objects``.)
    """
    if value.__class__ is not dict:
        return False
    kind, api_version = value.get("kind"), value.get("apiVersion")
    return (kind.__class__ is str and api_version.__class__ is str and kind != "" and api_version != ""
            and kind not in MEMOIZED_KINDS and not kind.endswith("List") and metadata_only_ok(value))


def _a_list(value: Any) -> bool:
    """Whether an item is itself a ``*List`` (a List in a List): its file is read whole, which gives its items
    their lines."""
    return isinstance(value, dict) and isinstance(value.get("kind"), str) and value["kind"].endswith("List")


_NOT_PARSED = object()
#: Kinds (as bytes) whose items are parsed alone: like-item templates are learnt from them.
_TEMPLATE_KINDS = frozenset(kind.encode() for kind in MEMOIZED_KINDS)


def _spool(stdin: IO[str] | IO[bytes] | None, budget: ReadBudget, directory: str | None) -> str:
    """Standard input copied to a temporary file (within ``budget``, as :func:`~._io.read_bytes` reads it)."""
    if stdin is None or getattr(stdin, "closed", False):
        raise DraConstructsError(STDIN_NAME, _FIELD, "-", "standard input is closed",
                                 f"pipe a {_EXPECTED} into the command, or pass a file path instead of -")
    raw: IO[bytes] | None = getattr(stdin, "buffer", None)
    fd, path = tempfile.mkstemp(prefix="dra-constructs-stdin-", suffix=".json", dir=directory)
    total = 0
    with os.fdopen(fd, "wb") as out:
        while True:
            try:
                if raw is not None:
                    block = raw.read(_SPOOL_BLOCK)
                else:
                    chunk = stdin.read(_SPOOL_BLOCK)
                    block = chunk.encode("utf-8", "surrogatepass") if isinstance(chunk, str) else bytes(chunk)
            except (OSError, ValueError) as error:  # EBADF, or a stream closed underneath
                raise DraConstructsError(STDIN_NAME, _FIELD, "-", f"cannot read standard input ({error})",
                                         f"pipe a {_EXPECTED} into the command, or pass a file path") from None
            if not block:
                break
            total += len(block)
            budget.check(total, STDIN_NAME, _FIELD)
            out.write(block)
    budget.take(total, STDIN_NAME, _FIELD)
    return path
