#!/usr/bin/env python3
"""Every repository path the documentation and the source comments cite
exists, and nothing reads a directory beside the clone.

    check_links.py REPO_ROOT

Scanned: every file `git ls-files` lists (or, outside a git checkout, every
file under the root but build folders) ending in .md, .c, .h, .cu, .cuh, .cpp,
.py, .sh, .cmake, CMakeLists.txt, and the scripts of .ci/. Checked:
- Markdown links [text](target) to a relative target: the file or folder
  exists (relative to the Markdown file; an #anchor is ignored);
- any token that starts with a top-level folder of the repository
  (core/, apps/, docs/, tests/, ...) or names a root file (README.md,
  CONTRIBUTING.md, ...) exists, or, with * or {a,b}, matches a file;
- no file mentions ../shared (the project stands alone);
- every `kvc <command>` in backquotes, and every kvc command line in a
  fenced block of Markdown, names a command of the CLI's table
  (apps/kvc/main.c), read from the source, not kept by hand here.
Dotfiles (.clang-format, ...) are scanned too, but git's own (.gitignore,
.gitattributes: patterns, not citations).
Placeholders (<...>, $VARS, ...) are not paths and are skipped. Exit 1 with
one line per broken citation (file:line: path)."""
import glob
import os
import re
import subprocess
import sys

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
EXTS = (".md", ".c", ".h", ".cu", ".cuh", ".cpp", ".py", ".sh", ".cmake")


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout
        files = [f for f in out.splitlines() if os.path.exists(os.path.join(root, f))]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, subdirs, names in os.walk(root):
        subdirs[:] = [s for s in subdirs if not s.startswith(("build", ".git"))]
        files += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return files


files = tracked_files()


def dotfile(f):
    b = os.path.basename(f)
    return b.startswith(".") and not b.startswith(".git") and "/" not in f.rstrip("/")


scanned = [f for f in files
           if f.endswith(EXTS) or os.path.basename(f) == "CMakeLists.txt" or f.startswith(".ci/") or dotfile(f)]
top = sorted({f.split("/")[0] for f in files if "/" in f} - {".github"})
root_files = sorted({f for f in files if "/" not in f})
path_re = re.compile(r"(?<![\w./$-])((?:%s)/[\w./*{},+-]*[\w*}])" % "|".join(re.escape(t) for t in top))
root_re = re.compile(r"(?<![\w./-])(%s)(?![\w-])" % "|".join(re.escape(f) for f in root_files if "." in f))
link_re = re.compile(r"\]\(([^)\s]+)\)")


def expand_braces(p):
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    return [q for alt in m.group(1).split(",") for q in expand_braces(p[:m.start()] + alt + p[m.end():])]


BUILT = (".a", ".o", ".so", ".bin.map", ".elf")  # build products, not sources


def exists(p, base=root, citing=None):
    """p exists relative to the root, to the citing file's folder or one above
    it (accel/cuda cites its own tests folder relative to itself), or names a
    test program by its source without the extension."""
    p = re.sub(r":\d+(-\d+)?$", "", p).rstrip(".,:;")
    if not p or p.endswith(BUILT):
        return True
    bases = [base]
    d = os.path.dirname(os.path.join(root, citing)) if citing else None
    while d and d.startswith(root):
        bases.append(d)
        d = os.path.dirname(d) if d != root else None
    for b in bases:
        for q in expand_braces(p):
            full = os.path.normpath(os.path.join(b, q))
            if glob.glob(full) if "*" in q else os.path.exists(full) or glob.glob(full + ".*"):
                return True
    return False


def cli_commands():
    """The command names of apps/kvc/main.c's table ({"name", "summary", fn})."""
    try:
        text = open(os.path.join(root, "apps/kvc/main.c"), encoding="utf-8").read()
    except OSError:
        return None
    return set(re.findall(r'\{"([a-z][a-z0-9-]*)",\s*"[^"]*",\s*\w+\}', text))


commands = cli_commands()
kvc_code_re = re.compile(r"`(?:\./)?(?:[\w./-]*/)?kvc ([a-z][a-z0-9-]*)")
kvc_line_re = re.compile(r"^\s*(?:\$ )?(?:[\w./-]*/)?kvc ([a-z][a-z0-9-]*)")

problems = []
for f in scanned:
    try:
        text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
    except OSError:
        continue
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if f.endswith(".md") and line.lstrip().startswith("```"):
            fenced = not fenced
        if commands:
            names = [m.group(1) for m in kvc_code_re.finditer(line)]
            if fenced and f.endswith(".md"):
                m = kvc_line_re.match(line)
                names += [m.group(1)] if m else []
            for c in names:
                if c not in commands:
                    problems.append("%s:%d: kvc %s is not a command of apps/kvc/main.c" % (f, n, c))
        if "../shared" in line and f != "tests/docs/check_links.py":
            problems.append("%s:%d: reads ../shared (the project must stand alone)" % (f, n))
        if f.endswith(".md"):
            for m in link_re.finditer(line):
                t = m.group(1).split("#")[0]
                if not t or re.match(r"^[a-z]+:", t) or t.startswith("<"):
                    continue
                if not exists(t, os.path.dirname(os.path.join(root, f))):
                    problems.append("%s:%d: link to %s" % (f, n, t))
        for m in path_re.finditer(line):
            p = m.group(1)
            if "<" in p or "$" in p or "..." in p:
                continue
            if not exists(p, citing=f):
                problems.append("%s:%d: %s" % (f, n, p))
for p in problems:
    print(p)
print("%d files scanned, %d broken citations" % (len(scanned), len(problems)))
sys.exit(1 if problems else 0)
