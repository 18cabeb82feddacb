"""A GPU tenant for the stand-in driver: context, allocation, a 32-bit pattern; then hold or exit.

Uses cuda-bindings directly (not the sanitizer's code), like any CUDA program. Prints ``ready``
once the pattern is written. ``--ignore-term`` ignores SIGTERM (only SIGKILL ends it);
``--exit`` leaves at once without freeing anything (the driver tears the context down).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from cuda.bindings import driver as cu


def check(result: object) -> object:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        print(f"error {err!r}", flush=True)
        raise SystemExit(3)
    return rest[0] if rest else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bytes", type=int, required=True)
    parser.add_argument("--pattern", type=int, required=True)
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--exit", action="store_true")
    args = parser.parse_args()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    check(cu.cuInit(0))
    device = check(cu.cuDeviceGet(0))
    context = check(cu.cuDevicePrimaryCtxRetain(device))
    check(cu.cuCtxSetCurrent(context))
    ptr = check(cu.cuMemAlloc(args.bytes))
    check(cu.cuMemsetD32(ptr, args.pattern, args.bytes // 4))
    print("ready", flush=True)
    if args.exit:
        return 0
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
