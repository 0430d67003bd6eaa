#!/usr/bin/env python3
"""The stable API tier, as a user sees it: every function the installed kvc.h
declares without KVC_ADVANCED, counted from clang's AST (not by a regex), and
checked against the limit docs/api.md promises (65). The advanced and internal
tiers must stay out of it: a symbol of either seen here fails the test.

usage: stable_tier.py CLANG INCLUDE_DIR [LIMIT]
Exit 77 (skip) when CLANG is not a clang."""
import re
import subprocess
import sys
import tempfile

clang, include = sys.argv[1], sys.argv[2]
limit = int(sys.argv[3]) if len(sys.argv) > 3 else 65
with tempfile.NamedTemporaryFile("w", suffix=".c") as tu:
    tu.write('#include "kvc/kvc.h"\n')
    tu.flush()
    try:
        ast = subprocess.run([clang, "-std=c11", "-I", include, "-fsyntax-only", "-Xclang", "-ast-dump", tu.name],
                             capture_output=True, text=True)
    except OSError:
        print("SKIP: no clang to read the AST")
        sys.exit(77)
if ast.returncode != 0:
    print(ast.stderr)
    print("FAIL: kvc.h does not compile without KVC_ADVANCED")
    sys.exit(1)
names = sorted({m.group(1) for m in re.finditer(r"^[|`]-FunctionDecl .*? (kvc_\w+) '", ast.stdout, re.M)})
print("stable tier: %d functions (limit %d)" % (len(names), limit))
for n in names:
    print("  " + n)
forbidden = [n for n in names if n.endswith("__ref") or n.startswith(("kvc_fx_", "kvc_rng_", "kvc_stream_attend_batch",
                                                                       "kvc_stream_attend_part", "kvc_stream_view"))]
if forbidden:
    print("FAIL: advanced or internal symbols in the stable tier: " + ", ".join(forbidden))
    sys.exit(1)
if len(names) > limit:
    print("FAIL: %d functions in the stable tier, more than %d" % (len(names), limit))
    sys.exit(1)
if len(names) < 20:  # the parse found almost nothing: the test would pass vacuously
    print("FAIL: only %d functions found; the AST pattern no longer matches" % len(names))
    sys.exit(1)
