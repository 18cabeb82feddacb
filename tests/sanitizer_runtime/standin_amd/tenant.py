"""An AMD GPU tenant for the stand-in: HIP allocation filled with one byte; then hold or exit.

Uses hip-python directly (not the sanitizer's code), like any HIP program. The device is chosen
by ``ROCR_VISIBLE_DEVICES`` in its environment. Prints ``ready`` once the bytes are written.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from hip import hip


def check(result: object) -> object:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != hip.hipError_t.hipSuccess:
        print(f"error {err!r}", flush=True)
        raise SystemExit(3)
    return rest[0] if rest else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bytes", type=int, required=True)
    parser.add_argument("--byte", type=int, default=0x3C)
    parser.add_argument("--ignore-term", action="store_true")
    args = parser.parse_args()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    check(hip.hipInit(0))
    check(hip.hipSetDevice(0))
    ptr = check(hip.hipMalloc(args.bytes))
    check(hip.hipMemset(int(ptr), args.byte, args.bytes))  # type: ignore[call-overload]
    print("ready", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
