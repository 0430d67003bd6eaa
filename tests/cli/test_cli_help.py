#!/usr/bin/env python3
"""The command line's one vocabulary (docs/cli.md), checked on the binary.

    test_cli_help.py KVC_EXE MODEL_DIR CASE

help_names_every_flag   every command's --help names every flag it accepts
                        (--list-flags, from the same table the parser reads),
                        and every --flag its help names is accepted
repeated_flag           a value flag given twice is an error, on every command
retired_flags           --budgets, --bytes, --bytes-pct name their replacement
budget_syntax           tokens, P%, P%f16, KiB/MiB and --compression-ratio give
                        the budgets they say, on one trace (kvc eval)
kvpress_aliases         every kvpress name `kvc methods` lists runs that method
short_forms             -m -p -n -t -s are --model --prompt --steps --threads --seed
"""
import os
import re
import subprocess
import sys
import tempfile

KVC, MODEL_DIR = sys.argv[1], sys.argv[2]
MODEL = os.path.join(MODEL_DIR, "stories260K.bin")
TOK = os.path.join(MODEL_DIR, "tok512.bin")


def run(args, timeout=300):
    p = subprocess.run([KVC] + args, capture_output=True, text=True, timeout=timeout)
    return p


def expect(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)
    print("ok: " + what)


def commands():
    """The commands as `kvc --help` lists them (bench expanded into its benchmarks)."""
    out = run(["--help"]).stdout
    names = [m.group(1) for m in re.finditer(r"^  ([a-z]+) ", out, re.M)]
    expect(len(names) >= 10, "kvc --help lists the commands (%d)" % len(names))
    cmds = []
    for n in names:
        if n == "bench":
            sub = run(["bench", "--help"]).stdout
            cmds += [["bench", m.group(1)] for m in re.finditer(r"^  ([a-z]+) ", sub, re.M)]
        else:
            cmds.append([n])
    return cmds


def help_names_every_flag():
    for c in commands():
        listed = run(c + ["--list-flags"])
        expect(listed.returncode == 0, "kvc %s --list-flags exits 0" % " ".join(c))
        accepted = set(listed.stdout.split())
        text = run(c + ["--help"]).stdout
        # a flag of another command, cited as "kvc bench --head-profile", is not this one's
        text = re.sub(r"kvc (?:[a-z]+ )+--[a-z0-9-]+", "", text)
        named = set(re.findall(r"(?<![\w-])(--[a-zA-Z](?:[a-z0-9-]*[a-zA-Z0-9])?)", text))
        missing = sorted(accepted - named)
        expect(not missing, "kvc %s --help names every accepted flag (missing: %s)" % (" ".join(c), missing))
        named -= {"--help", "--flag"}  # "-h, --help" and the "--flag value" convention line
        unknown = sorted(f for f in named if f not in accepted)
        expect(not unknown, "kvc %s --help names only accepted flags (unknown: %s)" % (" ".join(c), unknown))


def repeated_flag():
    for c in commands():
        flags = run(c + ["--list-flags"]).stdout.split()
        # the first value flag of the table: given twice it must be refused before anything runs
        text = run(c + ["--help"]).stdout
        value_flags = [f for f in flags if re.search(r"(?:^|, )%s [A-Za-z0-9<]" % re.escape(f), text, re.M)]
        if not value_flags:
            continue
        f = value_flags[0]
        p = run(c + [f, "1", f, "1"])
        expect(p.returncode == 2 and "given twice" in p.stderr, "kvc %s refuses %s given twice" % (" ".join(c), f))


def retired_flags():
    for flag, hint in [("--bytes-pct", "--budget P%f16"), ("--budgets", "--budget"), ("--bytes", "--budget")]:
        cmd = ["eval"] if flag == "--bytes-pct" else ["bench", "recall"]
        p = run(cmd + [flag, "5"])
        expect(p.returncode == 2 and "replaced by" in p.stderr and hint in p.stderr,
               "kvc %s %s names its replacement" % (" ".join(cmd), flag))


def eval_budget(trace, args):
    p = run(["eval", "--trace", trace, "--method", "uniform", "--sink", "4", "--window", "4", "--seed", "1"] + args)
    m = re.search(r"method uniform, budget (\d+)", p.stdout)
    return (int(m.group(1)) if m else None), p


def budget_syntax():
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "t")
        p = run(["synth", "--kind", "clustered", "--n", "400", "--d", "16", "--seed", "3", "--out", trace])
        expect(p.returncode == 0, "kvc synth writes a 400-token trace")
        b, _ = eval_budget(trace, ["--budget", "100"])
        expect(b == 100, "--budget 100 is 100 tokens (%s)" % b)
        b, _ = eval_budget(trace, ["--budget", "25%"])
        expect(b == 100, "--budget 25%% of 400 tokens is 100 tokens (%s)" % b)
        b, _ = eval_budget(trace, ["--compression-ratio", "0.75"])
        expect(b == 100, "--compression-ratio 0.75 keeps 25%% of 400 tokens: 100 (%s)" % b)
        # f16 exact of the trace: 400 x (16 + 16) x 2 B = 25600 B; 25% = 6400 B. The budget is the most
        # tokens whose whole arena (rows, weights, header) fits: fewer than 6400 / 64 = 100 f16 tokens.
        b_f16, p = eval_budget(trace, ["--budget", "25%f16", "--dtype", "f16"])
        m = re.search(r"arena (\d+) B", p.stdout)
        expect(b_f16 is not None and m and int(m.group(1)) <= 6400 and 0 < b_f16 < 100,
               "--budget 25%%f16 fits the arena in 6400 B (budget %s, %s)" % (b_f16, m and m.group(0)))
        b_kib, p = eval_budget(trace, ["--budget", "6400B", "--dtype", "f16"])
        expect(b_kib == b_f16, "--budget 6400B is the same budget as 25%%f16 here (%s, %s)" % (b_kib, b_f16))
        b_k, p = eval_budget(trace, ["--budget", "6.25KiB", "--dtype", "f16"])
        expect(b_k == b_f16, "--budget 6.25KiB is 6400 B (%s)" % b_k)
        for bad in ["0", "12.5", "101%", "5%f32", "-3", "7TiB", ""]:
            _, p = eval_budget(trace, ["--budget", bad])
            expect(p.returncode == 2 and "a budget is" in p.stderr, "--budget '%s' is refused with the syntax" % bad)
        _, p = eval_budget(trace, ["--budget", "100", "--compression-ratio", "0.5"])
        expect(p.returncode == 2 and "not both" in p.stderr, "--budget with --compression-ratio is refused")


def kvpress_aliases():
    out = run(["methods"]).stdout
    rows = [l.split()[:2] for l in out.splitlines() if l and not l.startswith("#")]
    aliases = [(name, kp) for name, kp in rows if kp != "-"]
    expect(len(aliases) >= 6, "kvc methods lists kvpress names (%d)" % len(aliases))
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "t")
        run(["synth", "--kind", "clustered", "--n", "300", "--d", "8", "--seed", "5", "--out", trace])
        for name, kp in aliases:
            budget = "300" if name == "exact" else "120"  # exact refuses to drop a token
            a = run(["eval", "--trace", trace, "--method", kp, "--budget", budget, "--sink", "4", "--window", "4"])
            b = run(["eval", "--trace", trace, "--method", name, "--budget", budget, "--sink", "4", "--window", "4"])
            expect(a.returncode == 0 and a.stdout == b.stdout, "--method %s runs %s" % (kp, name))


def short_forms():
    if not (os.path.exists(MODEL) and os.path.exists(TOK)):
        print("SKIP: stories260K not found in %s" % MODEL_DIR)
        sys.exit(77)
    long = run(["generate", "--model", MODEL, "--tokenizer", TOK, "--prompt", "Lily", "--steps", "12", "--threads",
                "1", "--seed", "3", "--temp", "0.8"])
    short = run(["generate", "-m", MODEL, "--tokenizer", TOK, "-p", "Lily", "-n", "12", "-t", "1", "-s", "3",
                 "--temp", "0.8"])
    text = lambda p: p.stdout.split("\n\n")[0]
    expect(long.returncode == 0 and short.returncode == 0 and text(long) == text(short),
           "-m -p -n -t -s write the same text as the long flags")


def steps_counts_generated():
    """--steps K is "tokens to generate" (its help): a prompt longer than K
    is not cut to K, and K tokens follow it (issue 49: the prompt counted)."""
    prompt = "Once upon a time there was a little girl named Lily. She liked to play outside in the park"
    r = run(["generate", "-m", MODEL, "--tokenizer", TOK, "-p", prompt, "-n", "5"])
    m = re.search(r"(\d+) tokens generated after a (\d+)-token prompt", r.stdout)
    expect(r.returncode == 0 and m is not None and int(m.group(2)) > 5 and int(m.group(1)) == 5,
           "generate -n 5 after a longer prompt generates 5 tokens (%s)" % (m.group(0) if m else r.stderr[-300:]))


def every_budget_spelling_every_method():
    """Every budget spelling the help lists is accepted by every method of
    `kvc methods` on generate and ppl, or refused with a reason that is not
    "too few" when the same spelling gives the plain methods room (issue 49:
    byte budgets were resolved before the prompt's length was set, so the
    prefill methods refused every one)."""
    methods = [m.group(1) for m in re.finditer(r"^([a-z0-9-]+) ", run(["methods"]).stdout, re.M)]
    expect(len(methods) >= 10, "kvc methods lists the methods (%d)" % len(methods))
    text = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    text.write("Once upon a time there was a little girl named Lily. She liked to play outside. " * 8)
    text.close()
    for spelling in ["160", "100%", "100%f16", "2MiB", "1MiB"]:
        for m in methods:
            common = ["-m", MODEL, "--tokenizer", TOK, "--method", m, "--budget", spelling, "--sink", "4",
                      "--window", "32", "--dtype", "int8"]
            g = run(["generate"] + common + ["-p", "Once upon a time", "-n", "120"])
            expect(g.returncode == 0 or (m == "exact" and "full" in g.stderr), "generate --method %s --budget %s (%s)" % (m, spelling, g.stderr.strip()[-200:]))
            p = run(["ppl"] + common + ["--text", text.name])
            # exact holds every token or refuses, saying so: its one allowed refusal
            expect(p.returncode == 0 or (m == "exact" and "exact refuses" in p.stderr), "ppl --method %s --budget %s (%s)" % (m, spelling, p.stderr.strip()[-200:]))
    os.unlink(text.name)


def one_number_grammar():
    """One number grammar for every numeric flag: decimal ASCII digits (a
    real also a fraction and an exponent). Hex, a leading '+', and an
    exponent where an integer is asked are refused everywhere (issue 49:
    --budget 0x60 was 96, --subgen-t 0x10 was 16, --sink 1e3 refused)."""
    base = ["generate", "-m", MODEL, "--tokenizer", TOK, "-n", "3"]
    for flag, value in [("--budget", "0x60"), ("--sink", "1e3"), ("--sink", "0x10"), ("--subgen-t", "0x10"),
                        ("--subgen-t", "1e1"), ("--steps", "+3"), ("--budget", "+96"), ("--window", " 8"),
                        ("--temp", "0x1p-1"), ("--beta", "0x1")]:
        r = run(base + ["--method", "subgen", flag, value])
        expect(r.returncode != 0 and value.strip() in r.stderr or r.returncode != 0,
               "%s %r refused (%s)" % (flag, value, r.stderr.strip()[-120:]))
    for flag, value in [("--budget", "96"), ("--sink", "16"), ("--subgen-t", "16"), ("--temp", "0.5"),
                        ("--beta", "1e-1")]:
        r = run(base + ["--method", "subgen", flag, value])
        expect(r.returncode == 0, "%s %s accepted (%s)" % (flag, value, r.stderr.strip()[-200:]))


CASES = {f.__name__: f for f in [help_names_every_flag, repeated_flag, retired_flags, budget_syntax, kvpress_aliases,
                                  short_forms, steps_counts_generated, every_budget_spelling_every_method,
                                  one_number_grammar]}
if __name__ == "__main__":
    CASES[sys.argv[3]]()
