#!/usr/bin/env python3
"""wp-report.py -- the tables of docs/proofs.md, generated from a verify run.

    python3 verify/wp-report.py BUILD/verify [--root REPO] [--out FILE]

Reads every job's JSON report (NAME.json, written by wp-check.sh with
-wp-report-json) and its NAME.stats.json (wall time, slowest goal, cached
goals), scans core/ for function definitions, ACSL contracts and the
`trusted-by:` markers of the trusted base, and writes Markdown:

  1. the jobs: goals proved / total, wall time, slowest goal, cached goals;
  2. per file of core/src: functions, functions with a contract, functions
     proved by a job, goals, trusted functions;
  3. coverage: every function of core/src that has a contract, is proved or is
     trusted, with the job that proves it and its status;
  4. the trusted base: every function whose contract the proofs assume, with
     how it is checked at run time (the text of its `trusted-by:` marker).

Exit status 1 if no job report is found or a report has unproved goals.
Nothing here is hand-kept: a new job, function or marker shows up by itself.
"""
import argparse
import glob
import json
import os
import re
import sys

CONTRACT_WORDS = re.compile(r"\b(requires|ensures|assigns)\b")


def strip_comments(text):
    """The text with comments blanked (newlines kept, so offsets still match)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def acsl_text(text):
    """The ACSL annotations of a file (/*@ ... */ blocks and //@ lines)."""
    return "\n".join(re.findall(r"/\*@(.*?)\*/", text, re.S) + re.findall(r"//@(.*)", text))


# Function-name templates: a generic body written once, `NAME(op)` in place of
# the function's name, instanced by `#define NAME(op) prefix##op##suffix` lines
# elsewhere (ref/rows_scaled.h, rows_scaled_types.h). Filled by main().
TEMPLATES = {}


def instances(name, rest):
    """The names a definition or prototype `name(op)(...)` stands for (just
    name when it is no template)."""
    if name not in TEMPLATES:
        return [name]
    m = re.match(r"\s*\(\s*(\w+)\s*\)", rest)
    return [pre + m.group(1) + suf for pre, suf in TEMPLATES[name]] if m else [name]


def definitions(text):
    """(name, line, start offset) of every function defined at file level."""
    code = strip_comments(text)
    # preprocessor lines, continuation lines included (a multi-line #define
    # before a function hid it); newlines kept so offsets still match
    code = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*$", lambda m: re.sub(r"[^\n]", " ", m.group(0)), code, flags=re.M)
    found, depth, last = [], 0, 0
    for i, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                head = code[last:i]
                m = re.search(r"\b([A-Za-z_]\w*)\s*\(([^;{}]*)\)\s*$", head, re.S)
                if m and not re.search(r"\b(struct|union|enum)\b\s*\w*\s*$", head[:m.start()]) \
                        and "=" not in head[:m.start()] and m.group(1) not in ("if", "for", "while", "switch"):
                    for fn in instances(m.group(1), "(" + m.group(2) + ")"):
                        found.append((fn, text.count("\n", 0, last + m.start(1)) + 1, last))
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                last = i + 1
        elif ch == ";" and depth == 0:
            last = i + 1
    return found


def contracted(text):
    """Names of the functions that an ACSL contract (not ghost code) precedes."""
    names = set()
    for m in re.finditer(r"/\*@(.*?)\*/", text, re.S):
        body = m.group(1)
        if body.lstrip().startswith("ghost") or not CONTRACT_WORDS.search(body):
            continue
        rest = strip_comments(text[m.end():m.end() + 600])
        f = re.match(r"\s*(?:(?:static|inline|const|unsigned|signed|struct|extern)\s+)*[\w]+[\s\*]+([A-Za-z_]\w*)\s*\(",
                     rest)
        if f:
            names.update(instances(f.group(1), rest[f.end() - 1:]))
    return names


def trusted_markers(text):
    """(function, check) for every `trusted-by:` marker: the function whose
    definition or prototype follows the comment that carries it."""
    out = []
    for m in re.finditer(r"/\*(?!@)(.*?)\*/", text, re.S):
        body = m.group(1)
        k = body.find("trusted-by:")
        if k < 0:
            continue
        check = " ".join(line.strip(" *") for line in body[k + len("trusted-by:"):].splitlines()).strip()
        rest = strip_comments(text[m.end():m.end() + 4000])
        f = re.search(r"^(?:static\s+)?(?:inline\s+)?[\w\s\*]*?\b([A-Za-z_]\w*)\s*\(", rest, re.M)
        out.append((f.group(1) if f else "?", check))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("logdir")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--out", default="-")
    ap.add_argument("--docs", help="replace the text between the wp-report markers of this Markdown page")
    a = ap.parse_args()

    jobs = {}
    for path in sorted(glob.glob(os.path.join(a.logdir, "*.json"))):
        name = os.path.basename(path)[:-5]
        if name.endswith(".stats") or name.startswith("planted"):
            continue
        rep = json.load(open(path))
        stats_path = os.path.join(a.logdir, name + ".stats.json")
        stats = json.load(open(stats_path)) if os.path.exists(stats_path) else {}
        jobs[name] = (rep, stats)
    if not jobs:
        print(f"wp-report: no job report in {a.logdir}", file=sys.stderr)
        return 1

    src = os.path.join(a.root, "core", "src")
    files = sorted(glob.glob(os.path.join(src, "**", "*.[ch]"), recursive=True))
    headers = sorted(glob.glob(os.path.join(a.root, "core", "include", "**", "*.h"), recursive=True))
    for path in files:
        for m in re.finditer(r"^\s*#\s*define\s+(\w+)\(op\)\s+(\w*)##op##(\w*)\s*$", open(path, errors="replace").read(), re.M):
            TEMPLATES.setdefault(m.group(1), []).append((m.group(2), m.group(3)))
    contracts, trusted, defined_in, header_contracts = set(), [], {}, set()
    for path in files + headers:
        text = open(path, errors="replace").read()
        rel = os.path.relpath(path, a.root)
        names = contracted(text)
        contracts |= {(rel, fn) for fn in names}
        if path.endswith(".h"):
            header_contracts |= names
        for fn, check in trusted_markers(text):
            trusted.append((rel, fn, check))
        for m in re.finditer(r"\baxiom\s+(\w+)\s*:", text):
            trusted.append((rel, "axiom " + m.group(1), "an axiom: stated in ACSL, assumed by every goal of the file"))
        for fn, _, _ in definitions(text):
            defined_in.setdefault(fn, []).append(rel)
    trusted_keys = {(rel, fn) for rel, fn, _ in trusted}
    # a contract on a header's prototype is the contract of the definition
    contracts |= {(rel, fn) for fn in header_contracts for rel in defined_in.get(fn, [])}

    # (file, function) -> [(job, valid, total)] from the per-function goal
    # lists. A static function is found in the files the job parsed (its log
    # says which); Frama-C renames a header's static inline copies fn_0, fn_1.
    proved = {}
    for job, (rep, _) in jobs.items():
        log = os.path.join(a.logdir, job + ".log")
        parsed = set()
        if os.path.exists(log):
            for m in re.finditer(r"^\[kernel\] Parsing (\S+)", open(log, errors="replace").read(), re.M):
                parsed.add(os.path.relpath(os.path.abspath(m.group(1)), a.root))
        merged = {}
        for fn, goals in rep.get("wp:functions", {}).items():
            base = fn if fn in defined_in else re.sub(r"_\d+$", "", fn)
            sec = goals.get("wp:section", {}).get("wp:main", {})  # the function's own total
            tot, val = sec.get("total", 0), sec.get("valid", 0)
            cands = defined_in.get(base, ["(ghost lemma)"])
            if len(cands) > 1:
                cands = [c for c in cands if c in parsed or c.endswith(".h")] or cands
            for rel in cands[:1]:
                v0, t0 = merged.get((rel, base), (0, 0))
                merged[(rel, base)] = (v0 + val, t0 + tot)
        for key, (val, tot) in merged.items():
            proved.setdefault(key, []).append((job, val, tot))

    # ACSL lemmas: every job that parses one assumes it, so each must be proved by some job
    # (-wp-prop @lemma: wp_lemmas); one proved by none fails the report
    lemmas = {}
    for path in files + headers:
        for m in re.finditer(r"\blemma\s+(\w+)\s*[{:]", acsl_text(open(path, errors="replace").read())):
            lemmas.setdefault(m.group(1), os.path.relpath(path, a.root))
    lemma_proofs = {}
    for job, (rep, _) in jobs.items():
        for sec in rep.get("wp:axiomatics", {}).values():
            for key, goals in sec.items():
                if key.startswith("lemma_"):
                    g = goals.get("wp:main", {})
                    lemma_proofs.setdefault(key[len("lemma_"):], []).append((job, g.get("valid", 0), g.get("total", 0)))

    lines = []
    w = lines.append
    w("### Jobs\n")
    w("| job | goals proved | wall (s) | slowest goal (s) | goals from the cache |")
    w("|---|---|---|---|---|")
    bad = 0
    tot_goals = tot_valid = 0
    for job, (rep, st) in jobs.items():
        g = rep["wp:global"]["wp:main"]
        tot_goals += g.get("total", 0)
        tot_valid += g.get("valid", 0)
        bad += g.get("valid", 0) != g.get("total", 0)
        w(f"| {job} | {g.get('valid', 0)}/{g.get('total', 0)} | {st.get('wall_s', '?')} | "
          f"{st.get('slowest_goal_s', '?')} | {st.get('cached_goals', '?')} |")
    w(f"| **all** | **{tot_valid}/{tot_goals}** | | | |\n")

    per_file = []
    body_lines = proved_lines = 0
    for path in files:
        text = open(path, errors="replace").read()
        defs = definitions(text)
        rel = os.path.relpath(path, a.root)
        if not defs:
            continue
        ends = [d[2] for d in defs[1:]] + [len(text)]
        n_con = n_pr = n_tr = goals = 0
        for (fn, line, start), end in zip(defs, ends):
            size = text.count("\n", start, end)
            body_lines += size
            n_con += (rel, fn) in contracts
            n_tr += (rel, fn) in trusted_keys
            if (rel, fn) in proved:
                n_pr += 1
                proved_lines += size
                goals += sum(t for _, _, t in proved[(rel, fn)])
        per_file.append((rel, len(defs), n_con, n_pr, goals, n_tr))

    n_all = sum(r[1] for r in per_file)
    n_proved = sum(r[3] for r in per_file)
    w("### Per file of core/src\n")
    w(f"Functions defined in core/src (.c and .h, static inline included): {n_all}; proved by a job: "
      f"{n_proved} ({100.0 * n_proved / max(n_all, 1):.0f}%); lines of the proved functions: "
      f"{100.0 * proved_lines / max(body_lines, 1):.0f}% of all function lines.\n")
    w("| file | functions | with a contract | proved | goals | trusted |")
    w("|---|---|---|---|---|---|")
    for rel, nf, n_con, n_pr, goals, n_tr in per_file:
        if n_con or n_pr or n_tr:
            w(f"| {rel} | {nf} | {n_con} | {n_pr} | {goals} | {n_tr} |")
    rest = [r for r in per_file if not (r[2] or r[3] or r[5])]
    w(f"| {len(rest)} other files | {sum(r[1] for r in rest)} | 0 | 0 | 0 | 0 |\n")

    w("### Coverage: function, contract, job, status\n")
    w("| function | file | contract | job | status |")
    w("|---|---|---|---|---|")
    keys = set(proved) | trusted_keys | {k for k in contracts if k[0].startswith("core/src")}
    for rel, fn in sorted(keys):
        con = "yes" if (rel, fn) in contracts else "no"
        if (rel, fn) in proved:
            for job, val, tot in proved[(rel, fn)]:
                w(f"| {fn} | {rel} | {con} | {job} | {'proved' if val == tot else 'UNPROVED'} {val}/{tot} |")
        elif (rel, fn) in trusted_keys:
            w(f"| {fn} | {rel} | {con} | - | trusted |")
        else:
            w(f"| {fn} | {rel} | {con} | - | contract used by callers, body not proved |")
    w("")

    w("### Lemmas\n")
    w("| lemma | file | job | status |")
    w("|---|---|---|---|")
    unproved_lemmas = 0
    for name, rel in sorted(lemmas.items()):
        runs = lemma_proofs.get(name, [])
        ok = any(val == tot and tot > 0 for _, val, tot in runs)
        unproved_lemmas += not ok
        where = ", ".join(job for job, _, _ in runs) or "-"
        w(f"| {name} | {rel} | {where} | {'proved' if ok else 'UNPROVED (assumed by the jobs that parse it)'} |")
    w("")

    w("### Trusted base\n")
    w("| function | file | how it is checked |")
    w("|---|---|---|")
    for rel, fn, check in sorted(trusted):
        w(f"| {fn} | {rel} | {check} |")
    w("")

    text = "\n".join(lines)
    if a.docs:
        page = open(a.docs).read()
        begin, end = "<!-- wp-report:begin -->", "<!-- wp-report:end -->"
        i, j = page.find(begin), page.find(end)
        if i < 0 or j < i:
            print(f"wp-report: {a.docs} has no {begin} ... {end} markers", file=sys.stderr)
            return 1
        open(a.docs, "w").write(page[:i + len(begin)] + "\n" + text + "\n" + page[j:])
    if a.out == "-":
        print(text)
    else:
        open(a.out, "w").write(text)
        print(f"wp-report: {len(jobs)} jobs, {tot_valid}/{tot_goals} goals, {n_proved}/{n_all} functions proved, "
              f"{len(trusted)} trusted; tables in {a.out}")
    if unproved_lemmas:
        print(f"wp-report: {unproved_lemmas} lemma(s) proved by no job (see the Lemmas table)", file=sys.stderr)
    return 1 if bad or unproved_lemmas else 0


if __name__ == "__main__":
    sys.exit(main())
