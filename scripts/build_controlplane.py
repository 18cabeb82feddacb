#!/usr/bin/env python3
"""Build the tests' Kubernetes control plane (``kcp``: etcd, kube-apiserver, -scheduler, -controller-manager).

One multi-call binary per Kubernetes version from ``tests/controlplane/go`` (``main.go`` and the pinned
``<version>.mod``/``.sum``), built once into ``${XDG_CACHE_HOME:-~/.cache}/dra-constructs/controlplane/
<version>/<key>/kcp``, where ``key`` hashes the sources and the Go version: a second run only hashes.
Go's build and module caches stay where ``go env`` puts them.

``--if-available`` (what ``make test`` uses) is a no-op when Go is missing, except under ``CI=true``,
where a missing toolchain fails like a failed build.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GO_DIR = ROOT / "tests" / "controlplane" / "go"
BINARY = "kcp"


def versions() -> list[str]:
    """The Kubernetes versions with a pinned modfile (``v1.37.2.mod`` ...), newest first."""
    found = [p.stem for p in GO_DIR.glob("v*.mod")]
    return sorted(found, key=lambda v: tuple(int(x) for x in v[1:].split(".")), reverse=True)


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dra-constructs" / "controlplane"


def go_version() -> str | None:
    """``go version`` output, or None when no Go toolchain is on PATH."""
    go = shutil.which("go")
    if go is None:
        return None
    return subprocess.run([go, "version"], check=True, capture_output=True, text=True).stdout.strip()


def build_key(version: str, go: str) -> str:
    """Hash of everything the binary is built from (sources, pinned modules, toolchain)."""
    digest = hashlib.sha256(go.encode())
    for name in ("main.go", f"{version}.mod", f"{version}.sum"):
        digest.update(name.encode() + b"\0" + (GO_DIR / name).read_bytes())
    return digest.hexdigest()[:16]


def binary_path(version: str, go: str | None = None) -> Path | None:
    """Where the built binary of ``version`` lies (whether built or not); None without Go."""
    go = go if go is not None else go_version()
    if go is None:
        return None
    return cache_root() / version / build_key(version, go) / BINARY


def _ldflags(version: str) -> str:
    major, minor, _ = version[1:].split(".")
    pkg = "k8s.io/component-base/version"
    return f"-s -w -X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major} -X {pkg}.gitMinor={minor}" \
        f" -X {pkg}.gitTreeState=clean"


def build(version: str, go: str) -> Path:
    """Build ``version`` unless its cached binary exists; returns the binary's path."""
    target = binary_path(version, go)
    assert target is not None
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a parallel build of the same version waits, then finds it built
        if target.exists():
            print(f"controlplane {version}: cached {target}")
            return target
        started = time.monotonic()
        partial = target.with_suffix(".partial")
        cmd = ["go", "build", f"-modfile={version}.mod", "-trimpath", "-buildvcs=false",
               f"-ldflags={_ldflags(version)}", "-o", str(partial), "."]
        print(f"controlplane {version}: building (first time: many minutes) ...", flush=True)
        subprocess.run(cmd, check=True, cwd=GO_DIR)
        partial.rename(target)
        for stale in target.parent.parent.iterdir():  # older keys of this version
            if stale.is_dir() and stale != target.parent:
                shutil.rmtree(stale)
        size = target.stat().st_size / 2**20
        print(f"controlplane {version}: built {target} in {time.monotonic() - started:.0f} s ({size:.0f} MiB)")
        return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="*", help=f"default: all of {', '.join(versions())}")
    parser.add_argument("--if-available", action="store_true", help="skip (exit 0) without Go, unless CI=true")
    parser.add_argument("--print-path", action="store_true", help="print each version's binary path and exit")
    args = parser.parse_args()
    wanted = args.versions or versions()
    unknown = sorted(set(wanted) - set(versions()))
    if unknown:
        print(f"unknown version(s) {', '.join(unknown)}: pinned are {', '.join(versions())}", file=sys.stderr)
        return 2
    go = go_version()
    if go is None:
        if args.if_available and os.environ.get("CI") != "true":
            print("controlplane: no Go toolchain on PATH; the control-plane tests will skip (install Go 1.26)")
            return 0
        print("controlplane: no Go toolchain on PATH (Go 1.26 is needed to build the test control plane)",
              file=sys.stderr)
        return 1
    if args.print_path:
        for version in wanted:
            print(binary_path(version, go))
        return 0
    try:
        for version in wanted:
            build(version, go)
    except subprocess.CalledProcessError as exc:
        print(f"controlplane: build failed ({exc})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
