"""slim_wheel.py WHEEL PREFIX...: rewrite WHEEL in place without its members under the PREFIXes (RECORD too).

For wheels too large to carry to the GPU machine whole (fetch_wheels.sh applies a release's "#slim" lines)."""

import sys
import zipfile
from pathlib import Path


def slim(wheel: Path, prefixes: tuple[str, ...]) -> None:
    tmp = wheel.with_suffix(".slim")
    before = wheel.stat().st_size
    with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            if info.filename.startswith(prefixes):
                continue
            data = zin.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                data = "".join(line for line in data.decode().splitlines(True) if not line.startswith(prefixes)).encode()
            zout.writestr(info, data)
    tmp.replace(wheel)
    print(f"slim_wheel: {wheel.name} {before >> 20} -> {wheel.stat().st_size >> 20} MiB")


if __name__ == "__main__":
    slim(Path(sys.argv[1]), tuple(sys.argv[2:]))
