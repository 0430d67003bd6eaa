#!/usr/bin/env python3
"""Regenerate the seed corpus of the .npy fuzz target (tests/fuzz/corpus/npy).

    python3 tests/fuzz/make_npy_corpus.py [OUTPUT_DIR]

Valid files are written with numpy when it is installed; without numpy an
equivalent writer in this script builds the same bytes (the two are compared
when numpy is present). Hostile files are built byte by byte. The output is
deterministic. Files named valid_* must parse; files named bad_* must be
rejected with KVC_E_FORMAT (the replay test only checks that neither crashes).
"""
import io
import os
import struct
import sys

try:
    import numpy as np
except ImportError:  # the corpus can still be built, without the cross-check
    np = None

MAGIC = b"\x93NUMPY"
ALIGN = 64
GROWTH_AXIS_MAX_DIGITS = 21  # as numpy.lib.format


def shape_repr(shape):
    if len(shape) == 1:
        return "(%d,)" % shape[0]
    return "(" + ", ".join(str(d) for d in shape) + ")"


def header_dict(descr, shape, fortran=False):
    return "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", shape_repr(shape))


def wrap(text, version=(1, 0), pad=True, hlen=None):
    """magic + version + header length + header text (+ numpy padding)."""
    body = text.encode("latin1") if isinstance(text, str) else text
    pre = 10 if version[0] == 1 else 12
    if pad:
        body += b" " * (ALIGN - (pre + len(body) + 1) % ALIGN) + b"\n"
    n = len(body) if hlen is None else hlen
    fmt = "<H" if version[0] == 1 else "<I"
    return MAGIC + bytes(version) + struct.pack(fmt, n) + body


def npy_bytes(values, shape, descr, version=(1, 0)):
    """What numpy.save writes (header with growth room, 64-byte aligned)."""
    text = header_dict(descr, shape)
    text += " " * (GROWTH_AXIS_MAX_DIGITS - len(str(shape[0])))
    code = {"f4": "f", "f2": "e"}[descr[1:]]
    order = "<" if descr[0] == "<" else ">"
    data = struct.pack(order + code * len(values), *values)
    return wrap(text, version) + data


def npy_numpy(values, shape, descr, version=(1, 0)):
    buf = io.BytesIO()
    arr = np.array(values, dtype=np.float32).reshape(shape).astype(descr)
    np.lib.format.write_array(buf, arr, version=version)
    return buf.getvalue()


def valid(values, shape, descr, version=(1, 0)):
    mine = npy_bytes(values, shape, descr, version)
    if np is not None:
        theirs = npy_numpy(values, shape, descr, version)
        if theirs != mine:
            raise SystemExit("numpy output differs for %s %s %s" % (shape, descr, version))
    return mine


def ramp(n, scale=0.25, offset=-2.0):
    return [i * scale + offset for i in range(n)]


F16_SPECIALS = [0.0, -0.0, 2.0 ** -24, 2.0 ** -14, 1.0, -2.5, 65504.0,
                float("inf"), float("-inf"), float("nan")]


def build():
    f = {}
    # ---- valid ----
    f["valid_f32_2d.npy"] = valid(ramp(4 * 8), (4, 8), "<f4")
    f["valid_f32_3d.npy"] = valid(ramp(2 * 3 * 5), (2, 3, 5), "<f4")
    f["valid_f32_1d.npy"] = valid(ramp(7), (7,), "<f4")
    f["valid_f16_2d.npy"] = valid(ramp(4 * 8), (4, 8), "<f2")
    f["valid_f16_specials.npy"] = valid(F16_SPECIALS, (10,), "<f2")
    f["valid_f32_be.npy"] = valid(ramp(12), (3, 4), ">f4")
    f["valid_f16_be.npy"] = valid(ramp(12), (2, 6), ">f2")
    f["valid_f32_v2.npy"] = valid(ramp(12), (3, 4), "<f4", (2, 0))
    f["valid_f32_v3.npy"] = valid(ramp(8), (2, 2, 2), "<f4", (3, 0))
    f["valid_f32_nonfinite.npy"] = valid([float("nan"), float("inf"), float("-inf"), 0.0], (2, 2), "<f4")
    # hand-written header: other key order, double quotes, odd spacing,
    # no trailing comma, Python 2 'L' suffix, 16-byte alignment like old numpy
    text = b'{"shape" :( 2L ,3 ),\t"descr":"<f4" ,"fortran_order":False}'
    text += b" " * (16 - (10 + len(text) + 1) % 16) + b"\n"
    f["valid_hand_spacing.npy"] = wrap(text, pad=False) + struct.pack("<6f", *ramp(6))

    # ---- hostile ----
    ok_hdr = header_dict("<f4", (3, 4))
    data48 = struct.pack("<12f", *ramp(12))
    good = wrap(ok_hdr) + data48
    f["bad_empty.npy"] = b""
    f["bad_magic.npy"] = b"\x93NUMPZ" + good[6:]
    f["bad_truncated_preamble.npy"] = good[:9]
    f["bad_version_4.npy"] = good[:6] + b"\x04\x00" + good[8:]
    f["bad_header_len_zero.npy"] = good[:8] + b"\x00\x00" + good[10:]
    f["bad_header_len_beyond_file.npy"] = good[:8] + struct.pack("<H", 0xFFFF) + good[10:]
    f["bad_v2_header_len_huge.npy"] = wrap(ok_hdr, (2, 0), hlen=0xFFFFFFFF) + data48
    f["bad_truncated_header.npy"] = good[:40]
    f["bad_truncated_data.npy"] = good[:-3]
    f["bad_trailing_bytes.npy"] = good + b"\x00\x00\x00\x00"
    f["bad_huge_shape.npy"] = wrap(header_dict("<f4", (2 ** 62, 2 ** 62))) + data48
    f["bad_int_overflow.npy"] = wrap(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % (10 ** 40)) + data48
    f["bad_elem_overflow.npy"] = wrap(header_dict("<f4", (65536, 65536))) + data48
    f["bad_negative_dim.npy"] = wrap(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-3, 4), }") + data48
    f["bad_zero_dim.npy"] = wrap(header_dict("<f4", (0, 4)))
    f["bad_shape_4d.npy"] = wrap(header_dict("<f4", (1, 1, 3, 4))) + data48
    f["bad_shape_empty.npy"] = wrap("{'descr': '<f4', 'fortran_order': False, 'shape': (), }") + data48[:4]
    f["bad_shape_not_tuple.npy"] = wrap(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (12), }") + data48
    f["bad_fortran_order.npy"] = wrap(header_dict("<f4", (3, 4), fortran=True)) + data48
    f["bad_descr_f8.npy"] = wrap(header_dict("<f8", (3, 2))) + data48
    f["bad_descr_i4.npy"] = wrap(header_dict("<i4", (3, 4))) + data48
    f["bad_missing_keys.npy"] = wrap("{'descr': '<f4', }") + data48
    f["bad_duplicate_key.npy"] = wrap(
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }") + data48
    f["bad_unterminated_dict.npy"] = wrap(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), ") + data48
    f["bad_unterminated_string.npy"] = wrap(
        "{'descr': '<f4, 'fortran_order': False, 'shape': (3, 4), }") + data48
    f["bad_non_ascii.npy"] = wrap(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), '\u00e9': 1, }") + data48
    end = 10 + struct.unpack("<H", good[8:10])[0]  # the header's final '\n' is good[end - 1]
    f["bad_no_newline.npy"] = good[:end - 1] + b" " + good[end:]
    return f


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "npy")
    os.makedirs(out, exist_ok=True)
    files = build()
    total = 0
    for name in sorted(files):
        with open(os.path.join(out, name), "wb") as fh:
            fh.write(files[name])
        total += len(files[name])
    print("wrote %d files, %d bytes, to %s (numpy %s)" % (
        len(files), total, out, "cross-checked" if np is not None else "not available"))


if __name__ == "__main__":
    main()
