"""One regression per hostile-input class of issue 11: a fresh process, 60 s, 2 GB of address space.

Each must end with the contract's exit code (2 for malformed input, with file and limit named),
no traceback, and well inside the limits (the limit that stops it is ours, not the rlimit).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .helpers import assert_clean, assert_input_error, run_cli

POD = """apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: i}]
"""
SLICE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
         "spec": {"driver": "gpu.nvidia.com", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                  "nodeName": "n", "devices": [{"name": "gpu-0", "attributes": {"index": {"int": 0}}}]}}


def _bomb(levels: int = 9, indent: str = "") -> str:
    lines = [f"{indent}l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*l{i - 1}"] * 9)
        lines.append(f"{indent}l{i}: &l{i} [{refs}]")
    return "\n".join(lines) + "\n"


def _write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def test_alias_bomb_in_a_custom_resource(tmp_path: Path) -> None:
    crd = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec:\n" + _bomb(indent="  ")
    path = _write(tmp_path, "bomb.yaml", crd)
    assert_input_error(run_cli("audit", path), path, "aliases expand to more than 100,000 extra nodes in a document")


def test_alias_bomb_inside_a_list(tmp_path: Path) -> None:
    items = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: example.com/v1\n  kind: Widget\n  spec:\n"
    path = _write(tmp_path, "bomb.yaml", items + _bomb(indent="    "))
    assert_input_error(run_cli("audit", path), "aliases expand")


def test_recursive_alias(tmp_path: Path) -> None:
    path = _write(tmp_path, "loop.yaml", "apiVersion: v1\nkind: ConfigMap\ndata: &d {x: *d}\n")
    assert_input_error(run_cli("audit", path), path)


def test_dev_zero_named_directly_and_through_stdin() -> None:
    assert_input_error(run_cli("audit", "/dev/zero"), "/dev/zero", "character device", "refused without reading")
    # audit's total defaults to 256 MiB (issue 25: cluster exports); --max-input-bytes sets another
    assert_input_error(run_cli("audit", "-", stdin_file="/dev/zero"), "<stdin>", "input too large", "256 MiB")
    assert_input_error(run_cli("audit", "--max-input-bytes", "32MiB", "-", stdin_file="/dev/zero"), "<stdin>",
                       "input too large", "32 MiB")
    assert_input_error(run_cli("cel", "check", "--jsonl", "/dev/zero"), "/dev/zero", "character device")


def test_symlink_to_dev_zero_in_a_scanned_directory(tmp_path: Path) -> None:
    _write(tmp_path, "ok.yaml", POD)
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    assert_input_error(run_cli("audit", str(tmp_path)), "zero.yaml", "character device")


def test_fifo_in_a_directory_and_as_jsonl(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    assert_input_error(run_cli("audit", str(tmp_path)), "pipe.yaml", "FIFO")
    assert_input_error(run_cli("cel", "check", "--jsonl", str(fifo)), "FIFO")
    assert_input_error(run_cli("cel", "match", "--slices", str(fifo), "true"), "FIFO")


def test_file_over_the_size_limit_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as handle:
        handle.truncate(257 * 1024 * 1024)  # sparse: refused from its size, never read
    assert_input_error(run_cli("audit", str(big)), "big.yaml", "input too large", "256 MiB")
    assert_input_error(run_cli("audit", "--max-input-bytes", "32MiB", str(big)), "big.yaml", "input too large",
                       "32 MiB")


@pytest.mark.parametrize("text", ["[" * 10_000, "[" * 10_000 + "]" * 10_000], ids=["open", "closed"])
def test_deep_json_nesting_everywhere(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, "deep.json", text)
    assert_input_error(run_cli("audit", path), path, "nested deeper than 200")
    assert_input_error(run_cli("audit", "-", stdin=text.encode()), "<stdin>")
    jsonl = _write(tmp_path, "deep.jsonl", '{"expression": "true", "x": ' + text + "}\n")
    assert_input_error(run_cli("cel", "check", "--jsonl", jsonl), "deep.jsonl:1", "nested deeper than 200")
    assert_input_error(run_cli("cel", "match", "--slices", path, "true"), path, "nested")


def test_500_nested_lists(tmp_path: Path) -> None:
    inner = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}'
    text = '{"apiVersion": "v1", "kind": "List", "items": [' * 500 + inner + "]}" * 500
    path = _write(tmp_path, "lists.json", text)
    assert_input_error(run_cli("audit", path), path, "nested deeper than 200")
    yaml_path = _write(tmp_path, "lists.yaml", text)
    assert_input_error(run_cli("audit", yaml_path), yaml_path, "nested")


def test_non_utf8_stdin_names_the_line() -> None:
    run = run_cli("audit", "-", stdin=POD.encode() + b"  annotations: {a: \"\xff\xfe\"}\n")
    assert_input_error(run, "<stdin>:6", "not UTF-8")


def test_closed_stdin() -> None:
    assert_input_error(run_cli("audit", "-", close_stdin=True), "<stdin>", "closed")
    assert_input_error(run_cli("cel", "check", "--jsonl", "-", close_stdin=True), "<stdin>", "closed")


@pytest.mark.parametrize("fmt", ["text", "json", "sarif"])
def test_lone_surrogates_never_break_the_output(tmp_path: Path, fmt: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p\ud800", "namespace": "\udfff"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    path = _write(tmp_path, "s.json", json.dumps(pod))  # ensure_ascii: the escapes \ud800, \udfff
    run = run_cli("audit", "--format", fmt, path)
    assert_clean(run, 1)
    # replaced when read, as the API server's JSON decoder does (JSON reports escape it)
    assert "\ufffd" in run.stdout or "\\ufffd" in run.stdout
    out = tmp_path / f"report.{fmt}"
    assert_clean(run_cli("audit", "--format", fmt, "-o", str(out), path), 1)
    assert out.read_text(encoding="utf-8")


def test_the_library_checker_judges_a_lone_surrogate_as_the_api_server_does() -> None:
    from dra_constructs.cel import check

    result = check('device.driver == "\ud800"', "1.34")  # Go's JSON decoder hands the server U+FFFD
    assert (result.verdict, result.expression) == ("OK", 'device.driver == "\ufffd"')
    broken = check("\udfff", "1.34")
    assert broken.verdict == "Invalid" and "incompatible function arguments" not in (broken.error or "")
    assert "Syntax error" in (broken.error or "")


def test_surrogate_in_a_jsonl_expression(tmp_path: Path) -> None:
    jsonl = _write(tmp_path, "s.jsonl", '{"expression": "device.driver == \\"\\ud800\\""}\n')
    assert_clean(run_cli("cel", "check", "--jsonl", jsonl))


@pytest.mark.parametrize("bad", [
    {"metadata": "x"}, {"spec": {"driver": "d", "devices": 5}},
    {"spec": {"driver": "d", "devices": [{"name": "g", "attributes": {"index": {"int": "two"}}}]}},
    {"spec": {"driver": "d", "devices": [{"name": "g", "capacity": {"memory": {"value": [1]}}}]}},
    {"spec": {"driver": "d", "pool": "p", "devices": []}}, {"spec": {"driver": "d", "devices": ["gpu"]}},
], ids=["metadata", "devices", "int", "capacity", "pool", "device"])
def test_wrong_typed_resource_slices(tmp_path: Path, bad: dict[str, object]) -> None:
    doc = {**SLICE, **bad}
    path = _write(tmp_path, "slices.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": [doc]}))
    run = run_cli("cel", "match", "--slices", path, "device.driver == 'x'")
    assert_input_error(run, path, "items[0]", "must be")


def test_duplicate_keys(tmp_path: Path) -> None:
    path = _write(tmp_path, "dup.yaml", POD + "metadata: {name: q}\n")
    assert_input_error(run_cli("audit", path), f"{path}:6", "duplicate key")
    json_path = _write(tmp_path, "dup.json", '{"apiVersion": "v1",\n "kind": "Pod",\n "kind": "Pod"}')
    assert_input_error(run_cli("audit", json_path), f"{json_path}:3", "duplicate key")


def test_wrong_typed_spec_fields_name_file_line_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "d.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n"
                  "  template:\n    spec:\n      containers: {}\n")
    assert_input_error(run_cli("audit", path), f"{path}:7", "spec.template.spec.containers", "must be a list")


@pytest.mark.parametrize("count", ["1e30", "1.0e+30", "99999999999999999999", "true", ".nan"])
def test_count_out_of_range_or_not_an_integer(tmp_path: Path, count: str) -> None:
    path = _write(tmp_path, "c.yaml", "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
                  "metadata: {name: t}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: g\n"
                  f"        exactly: {{deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: {count}}}\n")
    assert_input_error(run_cli("audit", path), f"{path}:9", "count", "64-bit integer")


def test_huge_integer_literal(tmp_path: Path) -> None:
    path = _write(tmp_path, "n.json", '{"apiVersion": "v1", "kind": "ConfigMap", "x": ' + "9" * 5000 + "}")
    assert_input_error(run_cli("audit", path), path, "cannot be read")


def test_nan_never_reaches_jsonl_output(tmp_path: Path) -> None:
    jsonl = _write(tmp_path, "n.jsonl", '{"expression": "true"}\n{"expression": "true", "w": NaN}\n')
    run = run_cli("cel", "check", "--jsonl", jsonl)
    assert_input_error(run, "n.jsonl:2", "NaN")
    assert "NaN" not in run.stdout


def test_invalid_utf8_in_a_cel_check_argument() -> None:
    run = run_cli("cel", "check", os.fsdecode(b"device.driver == '\xff'"))
    assert_input_error(run, "EXPRESSION", "not valid UTF-8")
    assert "pybind11" not in run.stderr and "object at 0x" not in run.stderr


def test_output_to_an_unwritable_path(tmp_path: Path) -> None:
    pod = _write(tmp_path, "p.yaml", POD)
    target = tmp_path / "missing" / "report.json"
    assert_input_error(run_cli("audit", "-o", str(target), pod), str(target), "cannot write")


def test_bom_accepted_by_every_reader(tmp_path: Path) -> None:
    bom = b"\xef\xbb\xbf"
    assert_clean(run_cli("audit", _write(tmp_path, "p.yaml", bom + POD.encode())), 0)
    assert_clean(run_cli("cel", "check", "--jsonl", _write(tmp_path, "e.jsonl", bom + b'{"expression": "true"}\n')), 0)
    slices = _write(tmp_path, "s.json", bom + json.dumps(SLICE).encode())
    assert_clean(run_cli("cel", "match", "--slices", slices, "device.driver == 'gpu.nvidia.com'"), 0)


def test_node_agent_config_limits(tmp_path: Path) -> None:
    module = "dra_constructs.agent.cli"
    for path, words in ((_write(tmp_path, "bomb.yaml", _bomb()), ("aliases expand",)),
                        (_write(tmp_path, "deep.json", "[" * 10_000), ("nested",)),
                        ("/dev/zero", ("character device",))):
        assert_input_error(run_cli("run", "--config", path, module=module), path, *words)


def test_jsonl_record_limit(tmp_path: Path) -> None:
    jsonl = _write(tmp_path, "many.jsonl", '{"expression": "true"}\n' * 100_001)
    assert_input_error(run_cli("cel", "check", "--jsonl", jsonl), "many.jsonl:100001", "100,000 expressions")


def test_match_evaluation_limit(tmp_path: Path) -> None:
    jsonl = _write(tmp_path, "e.jsonl", '{"expression": "true"}\n' * 100_000)
    devices = [{"name": f"gpu-{i}"} for i in range(21)]
    slices = _write(tmp_path, "s.json", json.dumps({**SLICE, "spec": {**SLICE["spec"], "devices": devices}}))
    assert_input_error(run_cli("cel", "match", "--slices", slices, "--jsonl", jsonl), "2,000,000 evaluations")


def test_text_inside_manifests_is_bounded_too(tmp_path: Path) -> None:
    """A device-plugin ConfigMap's YAML and a suppressions annotation are parsed again: same limits."""
    bomb = json.dumps("sharing:\n" + _bomb(indent="  "))
    huge = json.dumps("sharing: " + "9" * 5000)
    deep = json.dumps("[" * 5000 + "]" * 5000)
    path = _write(tmp_path, "cm.json", '{"apiVersion": "v1", "kind": "List", "items": ['
                  f'{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "a"}}, "data": {{"x": {bomb}}}}},'
                  f'{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "b"}}, "data": {{"x": {huge}}}}},'
                  '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": '
                  f'{{"guardrails.dra-constructs.io/suppressions": {deep}}}}}, "spec": {{"containers": []}}}}]}}')
    assert_clean(run_cli("audit", path), 0, 1)


def test_alias_bombs_spread_over_many_documents(tmp_path: Path) -> None:
    doc = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec:\n" + _bomb(levels=4, indent="  ")
    path = _write(tmp_path, "many.yaml", "---\n".join([doc] * 20))
    assert_input_error(run_cli("audit", path), path, "1,000,000 extra nodes in one input")


def test_one_document_with_too_many_nodes(tmp_path: Path) -> None:
    """8 MB of ``1,`` would be 4,000,000 nodes (~1.2 GB composed): refused from the parser's events."""
    path = _write(tmp_path, "flat.yaml", "apiVersion: v1\nkind: ConfigMap\nx: [" + "1," * 4_000_000 + "1]\n")
    assert_input_error(run_cli("audit", path), f"{path}:3", "more than 2,000,000 nodes")


def test_closed_stdout_keeps_the_exit_code(tmp_path: Path) -> None:
    pod = _write(tmp_path, "p.yaml", POD.replace("image: i}", "image: i, resources: {limits: {nvidia.com/gpu: 1}}}"))
    assert_clean(run_cli("audit", pod, close_stdout=True), 1)
    assert_clean(run_cli("cel", "check", "true", close_stdout=True), 0)


@pytest.mark.parametrize("head", ["created: 2001-12-14\n", "base: &base {k: v}\nmerged:\n  <<: *base\n"],
                         ids=["timestamp", "merge-key"])
def test_alias_bomb_in_documents_pyyaml_builds(tmp_path: Path, head: str) -> None:
    """Documents with timestamps or merge keys take the general path: the same alias budget."""
    path = _write(tmp_path, "b.yaml", "apiVersion: example.com/v1\nkind: Widget\n" + head + _bomb())
    assert_input_error(run_cli("audit", path), path, "aliases expand")


@pytest.mark.parametrize("head", ["", "apiVersion: v1\nkind: List\nitems:\n- "], ids=["object", "list-item"])
def test_explicit_tag_pyyaml_cannot_construct(tmp_path: Path, head: str) -> None:
    """``!!bool maybe`` (KeyError in PyYAML), ``!!timestamp x`` (AttributeError), ``!!int ""`` (IndexError)."""
    path = _write(tmp_path, "t.yaml", head + "{apiVersion: v1, kind: Pod, metadata: {name: !!bool maybe, "
                  "uid: !!timestamp x, generation: !!int ''}}\n")
    assert_input_error(run_cli("audit", path), path, "cannot be read")


@pytest.mark.parametrize(("data", "mapped"), [("", True), (_bomb(), False), ("x: !!bool maybe\n", False),
                                             ("a: 1\n---\nb: 2\n", False)], ids=["clean", "bomb", "tag", "two"])
def test_kueue_configuration_data_is_read_under_the_limits(tmp_path: Path, data: str, mapped: bool) -> None:
    """A Kueue configuration ConfigMap's data is audited input: an alias bomb or a tag PyYAML cannot build
    in it maps nothing (DRA014 says the class is not mapped) - never a traceback or the bomb expanded."""
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "m", "namespace": "kueue-system", "labels": {"dra-constructs.io/component": "kueue-configuration"}},
        "data": {"c.yaml": data + "resources:\n  deviceClassMappings:\n  - name: x/y\n"
                 "    deviceClassNames: [gpu.nvidia.com]\n"}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
             "metadata": {"name": "t", "namespace": "q"},
             "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}}}}
    queued = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "j", "namespace": "q", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "resourceClaims": [
            {"name": "gpu", "resourceClaimTemplateName": "t"}],
            "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}]}}}}
    path = _write(tmp_path, "kueue.json", json.dumps({"apiVersion": "v1", "kind": "List",
                                                      "items": [config, claim, queued]}))
    run = run_cli("audit", "--format", "json", "--kubernetes-version", "1.34", path)
    assert_clean(run, 0, 1)
    unmapped = [f for f in json.loads(run.stdout)["findings"] if f["rule"] == "DRA014" and "do not map" in f["message"]]
    assert bool(unmapped) is not mapped, unmapped
