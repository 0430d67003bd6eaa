#!/usr/bin/env python3
"""Command-line regressions of the trust issue: budgets that cannot exhaust
memory, messages that say what is wrong. Each case runs `kvc` and checks its
exit status and its message.

    test_cli_trust.py KVC_EXE MODEL_DIR CASE

Cases needing stories260K exit 77 (skip) when MODEL_DIR lacks it."""
import os
import re
import resource
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fuzz"))
from make_gguf_corpus import gguf, s  # noqa: E402
from make_gguf_model_corpus import tiny_llama  # noqa: E402

KVC, MODEL_DIR = sys.argv[1], os.environ.get("KVC_MODEL_DIR", sys.argv[2])
# sanitizer builds reserve terabytes of address space: no RLIMIT_AS there
# (the release build's run of the same cases checks the memory caps)
SANITIZED = os.environ.get("KVC_TEST_SANITIZED") == "1"
STORY = os.path.join(HERE, "..", "data", "story.txt")
MODEL = os.path.join(MODEL_DIR, "stories260K.bin")
TOK = os.path.join(MODEL_DIR, "tok512.bin")
SKIP = 77


def run(args, mem_gib=None, env=None, timeout=300):
    def limit():
        if mem_gib and not SANITIZED:
            b = int(mem_gib * (1 << 30))
            resource.setrlimit(resource.RLIMIT_AS, (b, b))
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([KVC] + args, capture_output=True, text=True, preexec_fn=limit, env=e, timeout=timeout)
    print("$ kvc " + " ".join(args))
    print("exit %d\n%s%s" % (p.returncode, p.stdout[-1500:], p.stderr[-1500:]))
    return p


def need_model():
    if not (os.path.exists(MODEL) and os.path.exists(TOK)):
        print("SKIP: stories260K not found in %s" % MODEL_DIR)
        sys.exit(SKIP)


def expect(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)


def llama_gguf(eps=1e-5, base=10000.0):
    u32 = lambda k, v: (k, 4, struct.pack("<I", v))
    f32 = lambda k, v: (k, 6, struct.pack("<f", v))
    kvs = [("general.architecture", 8, s("llama")), u32("llama.block_count", 1), u32("llama.embedding_length", 8),
           u32("llama.feed_forward_length", 16), u32("llama.attention.head_count", 2),
           u32("llama.attention.head_count_kv", 1), u32("llama.context_length", 64),
           f32("llama.rope.freq_base", base), f32("llama.attention.layer_norm_rms_epsilon", eps)]
    return gguf(kvs=kvs)


def write(tmp, name, data):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def case_ppl_budget_clamped():
    """kvc ppl --budget 16777216 touched 22 GB; now clamped to the text, under a 1 GiB address-space cap."""
    need_model()
    p = run(["ppl", "--model", MODEL, "--tokenizer", TOK, "--text", STORY, "--method", "uniform",
             "--budget", "16777216"], mem_gib=1)
    expect(p.returncode == 0 and "clamped to" in p.stderr, "ppl with a huge budget runs, clamped, in 1 GiB")


def case_eval_budget_clamped():
    """kvc eval allocated 2.2 GB for a 512-token trace."""
    need_model()
    with tempfile.TemporaryDirectory() as tmp:
        p = run(["dump", "--model", MODEL, "--tokenizer", TOK, "--steps", "200", "--text", STORY, "--out", tmp])
        expect(p.returncode == 0, "dump a trace")
        p = run(["eval", "--trace", os.path.join(tmp, "L1"), "--method", "subgen", "--budget", "16777216",
                 "--reference", "f64"], mem_gib=1)
        expect(p.returncode == 0 and "clamped to 200" in p.stderr, "eval with a huge budget runs, clamped, in 1 GiB")


def case_floor_every_type():
    """kvc floor holds a trace in every storage type the reference reads (KIVI4 among them, not in a list kept
    here) and compares each position with exact attention; f32 storage adds only the attend's float rounding,
    every other type a finite error below 1; bad arguments are refused with exit 2."""
    need_model()
    with tempfile.TemporaryDirectory() as tmp:
        p = run(["dump", "--model", MODEL, "--tokenizer", TOK, "--steps", "100", "--text", STORY, "--out", tmp])
        expect(p.returncode == 0, "dump a trace")
        p = run(["floor", "--trace", os.path.join(tmp, "L1"), "--head", "1", "--from", "10"])
        expect(p.returncode == 0, "floor runs")
        rows = {l.split()[0]: (float(l.split()[1]), float(l.split()[2])) for l in p.stdout.splitlines()[2:]}
        expect("kivi4" in rows and "int4" in rows and "f16" in rows, "a row per type, kivi4 included")
        # f32 rows through the f32-summing table: the attend's rounding, about (n + d) 2^-24 relative
        expect(rows["f32"][0] < 100 * 2**-24 * 8, "f32 storage adds only rounding")
        expect(all(0.0 <= e < 1.0 for e, _ in rows.values()), "every error finite and below 1")
        for bad in (["--from", "100"], ["--head", "x"], []):
            args = ["floor"] + (["--trace", os.path.join(tmp, "L1")] if bad != [] else []) + bad
            p = run(args)
            named = bad[0] if bad else "--trace"
            expect(p.returncode == 2 and named in p.stderr, "refused, naming %s: %s" % (named, " ".join(bad)))


def case_fig1_protocol():
    """kvc fig1 runs the Figure 1 protocol on a trace: a line per T with both errors finite and their ratio, a CSV
    row per (head, T, seed, method) with the survivors floor-halved; a middle too short and bad lists are refused."""
    need_model()
    with tempfile.TemporaryDirectory() as tmp:
        p = run(["dump", "--model", MODEL, "--tokenizer", TOK, "--steps", "120", "--text", STORY, "--out", tmp])
        expect(p.returncode == 0, "dump a trace")
        tr, csv_path = os.path.join(tmp, "L1"), os.path.join(tmp, "f.csv")
        p = run(["fig1", "--trace", tr, "--first", "16", "--recent", "16", "--rounds", "1,2", "--seeds", "2",
                 "--heads", "0,1", "--methods", "uniform,exact", "--csv", csv_path])
        expect(p.returncode == 0, "fig1 runs")
        lines = [l.split() for l in p.stdout.splitlines()[2:4]]
        expect(len(lines) == 2 and [int(l[1]) for l in lines] == [44, 22], "a line per T, 88 middle tokens halved")
        expect(all(0.0 < float(l[2]) < 10 and 0.0 < float(l[3]) < 10 for l in lines), "finite errors")
        uni = [l for l in p.stdout.splitlines() if l.startswith("uniform ")]
        ex = [l for l in p.stdout.splitlines() if l.startswith("exact ")]
        expect(len(uni) == 1 and uni[0].split()[1::2] == ["44", "22"], "the uniform stream holds its budget")
        expect(len(ex) == 1 and ex[0].split()[1:] == ["refused", "refused"], "exact refuses a budget below the middle")
        rows = open(csv_path).read().splitlines()
        expect(len(rows) == 1 + 2 * 2 * 2 * 3, "a CSV row per head, T, seed and method (offline, uniform, stream)")
        for bad in (["--first", "60", "--recent", "60"], ["--rounds", "1,x"], ["--methods", "nosuch"]):
            p = run(["fig1", "--trace", tr] + bad)
            expect(p.returncode == 2 and "kvc fig1:" in p.stderr, "refused: %s" % " ".join(bad))


def case_arena_limit_refuses():
    """Above KVC_MAX_ARENA_MB the command says so before allocating."""
    need_model()
    p = run(["ppl", "--model", MODEL, "--tokenizer", TOK, "--text", STORY, "--method", "uniform", "--budget", "400"],
            env={"KVC_MAX_ARENA_MB": "0.25"})
    expect(p.returncode != 0 and "above the limit of 0.250 MiB" in p.stderr, "a stated limit, with a message")


def case_ppl_long_text():
    """A 2 MB text: only what the context holds is encoded (the old loop was quadratic in the whole text)."""
    need_model()
    with tempfile.TemporaryDirectory() as tmp:
        story = open(STORY).read()
        path = write(tmp, "long.txt", (story * (2_000_000 // len(story) + 1)).encode())
        p = run(["ppl", "--model", MODEL, "--tokenizer", TOK, "--text", path, "--method", "exact", "--budget", "512"],
                timeout=120)
        expect(p.returncode == 0 and "perplexity=" in p.stdout, "ppl on 2 MB of text")


def case_dump_65_steps():
    """kvc dump --steps 65 said "out of memory" (its exact cache had 32 + 32 sink/window tokens)."""
    need_model()
    with tempfile.TemporaryDirectory() as tmp:
        p = run(["dump", "--model", MODEL, "--tokenizer", TOK, "--steps", "65", "--out", tmp])
        expect(p.returncode == 0 and os.path.exists(os.path.join(tmp, "L0", "k.npy")), "dump 65 steps")


def case_logits_empty_tokens():
    need_model()
    p = run(["logits", "--model", MODEL, "--tokens", ""])
    expect(p.returncode == 2 and "at least one token" in p.stderr, "empty token list named")


def case_gguf_bad_metadata():
    """rms epsilon NaN / -1 and rope base 0 / NaN: kvc logits exited 1 with no message; then
    (issue 49) rms epsilon 1e30 and rope base 1e-30 and 1 were accepted."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, kw, key in [("eps_nan", {"eps": float("nan")}, "layer_norm_rms_epsilon"),
                              ("eps_neg", {"eps": -1.0}, "layer_norm_rms_epsilon"),
                              ("eps_huge", {"eps": 1e30}, "layer_norm_rms_epsilon"),
                              ("base_zero", {"base": 0.0}, "freq_base"),
                              ("base_nan", {"base": float("nan")}, "freq_base"),
                              ("base_tiny", {"base": 1e-30}, "freq_base"),
                              ("base_one", {"base": 1.0}, "freq_base")]:
            path = write(tmp, name + ".gguf", llama_gguf(**kw))
            p = run(["logits", "--model", path, "--tokens", "1"])
            expect(p.returncode != 0 and key in p.stderr and "must be in" in p.stderr, name + " named")


def case_gguf_overlapping_tensors():
    with tempfile.TemporaryDirectory() as tmp:
        f32 = struct.pack("<16f", *range(16))
        path = write(tmp, "overlap.gguf", gguf(kvs=[("general.architecture", 8, s("llama"))],
                                               tensors=[("a", [16], 0, 0), ("b", [8], 0, 32)], data=f32))
        p = run(["gguf", path])
        expect(p.returncode != 0 and "overlaps" in p.stderr, "overlapping tensor data refused")


def case_not_a_regular_file():
    """kvc gguf DIRECTORY called malloc(2^63)."""
    with tempfile.TemporaryDirectory() as tmp:
        p = run(["gguf", tmp], mem_gib=1)
        expect(p.returncode != 0 and "not a regular file" in p.stderr, "a directory is refused by name")
        p = run(["logits", "--model", tmp, "--tokens", "1"], mem_gib=1)
        expect(p.returncode != 0 and "not a regular file" in p.stderr, "the model loader too")


def case_generate_tail_full():
    """balancekv-prefill stopped with "forward failed at position 79" without saying why; now the
    prefill methods' default tail is a reservoir that never fills, and the exact tail, when asked
    for, names itself and the way past it."""
    need_model()
    for method, flag in (("balancekv-prefill", "--bkv-tail"), ("express-prefill", "--express-tail")):
        base = ["generate", "--model", MODEL, "--tokenizer", TOK, "--method", method, "--budget", "128",
                "--steps", "450"]
        p = run(base)
        expect(p.returncode == 0 and "450 tokens in" in p.stdout + p.stderr, method + ": the default tail never stops")
        p = run(base + [flag, "exact"])
        expect(p.returncode != 0 and "exact tail" in p.stderr and "--budget" in p.stderr and flag + " exact" in p.stderr,
               method + ": the full exact tail is named, with the way past it")


def case_generate_every_method_past_budget():
    """A decoder never stops: every method `kvc methods` lists generates 4x its budget of steps on
    stories260K (budget 128, 512 steps; a run may end early only at the end-of-text token)."""
    need_model()
    listed = run(["methods"])
    expect(listed.returncode == 0, "kvc methods lists the registry")
    methods = [line.split()[0] for line in listed.stdout.splitlines() if line.strip() and not line.startswith("#")]
    expect(len(methods) >= 13, "every method of the registry is listed")
    for m in methods:
        p = run(["generate", "--model", MODEL, "--tokenizer", TOK, "--method", m, "--budget", "128", "--steps", "512"])
        expect(p.returncode == 0 and "tokens in" in p.stdout + p.stderr and "stopped" not in p.stderr,
               m + ": generates past its budget without stopping")


def case_ppl_pyramid_names_layer():
    need_model()
    p = run(["ppl", "--model", MODEL, "--tokenizer", TOK, "--text", STORY, "--method", "uniform", "--budget", "70",
             "--policy", "pyramid"])
    expect(p.returncode != 0 and "layer 3 (budget 52" in p.stderr, "the refused layer and its budget are named")


def case_oracle_budget_named():
    need_model()
    with tempfile.TemporaryDirectory() as tmp:
        expect(run(["dump", "--model", MODEL, "--tokenizer", TOK, "--steps", "100", "--out", tmp]).returncode == 0,
               "dump")
        p = run(["oracle", "--trace", os.path.join(tmp, "L0"), "--method", "uniform", "--budget", "64,128,256"])
        expect(p.returncode == 2 and "refuses budget 64" in p.stderr and "n_sink + n_window + 2" in p.stderr,
               "the refused budget and the rule are named")


def case_flag_dialects():
    """One flag table: --flag value and --flag=value mean the same, method flags included."""
    need_model()
    with tempfile.TemporaryDirectory() as tmp:
        expect(run(["dump", "--model", MODEL, "--tokenizer", TOK, "--steps", "120", "--out", tmp]).returncode == 0, "dump")
        a = run(["eval", "--trace", os.path.join(tmp, "L1"), "--method", "subgen", "--budget", "64", "--sink", "4",
                 "--window", "4", "--subgen-t", "4", "--reference", "f64"])
        b = run(["eval", "--trace=" + os.path.join(tmp, "L1"), "--method=subgen", "--budget=64", "--sink=4",
                 "--window=4", "--subgen-t=4", "--reference=f64"])
        expect(a.returncode == 0 and a.stdout == b.stdout, "both dialects give the same run")
        c = run(["eval", "--trace", os.path.join(tmp, "L1"), "--method", "subgen", "--budget=64", "--subgen-t=0.5"])
        expect(c.returncode == 2 and "--subgen-t" in c.stderr, "a bad method flag is named")


def case_head_profile():
    """kvc profile writes a head per line; kvc bench --head-profile builds ragged caches that stay within the
    column's bytes (the sum over heads, not each head), and a broken or foreign profile is refused by name."""
    need_model()
    import csv
    with tempfile.TemporaryDirectory() as tmp:
        prof = os.path.join(tmp, "p.txt")
        p = run(["profile", "--model", MODEL, "--tokenizer", TOK, "--text", STORY, "--tokens", "512", "--passkeys",
                 "1", "--out", prof])
        expect(p.returncode == 0, "profile runs")
        lines = [l.split() for l in open(prof) if not l.startswith("#")]
        expect(len(lines) == 5 * 4 and all(l[2] in ("streaming", "retrieval", "diffuse") for l in lines),
               "one line per (layer, kv head) of stories260K (5 x 4), each with a kind")
        expect(all(0.0 <= float(l[3]) <= 1.0 + 1e-4 and 0.0 <= float(l[4]) <= 1.0 + 1e-4 for l in lines),
               "the scores are shares of attention")
        out = os.path.join(tmp, "b.csv")
        p = run(["bench", "ppl", "--model", MODEL, "--tokenizer", TOK, "--text", STORY, "--methods", "sink-window",
                 "--budget", "50%f16", "--protect", "25", "--head-profile", prof, "--head-shares", "0.3,4,1",
                 "--csv", out, "--quiet", "--threads", "1"])
        expect(p.returncode == 0 and "sink-window 50%f16 heads" in p.stdout and "n/a" not in p.stdout,
               "the head-wise twin runs, protected spans sized per head (shares that leave streaming heads"
               " fewer tokens than the uniform column's protected slots)")
        rows = {(r["method"], r["head_wise"]): r for r in csv.DictReader(open(out))}
        flat, ragged = rows[("sink-window", "0")], rows[("sink-window", "1")]
        f16 = 512 * 2 * 8 * 2 * 20  # the f16 exact cache of every stream: tokens x (d + dv) x 2 B x streams
        expect(int(ragged["cache_peak_bytes"]) <= f16 // 2 and int(flat["cache_peak_bytes"]) <= f16 // 2,
               "both columns hold at most 50% of the f16 bytes in all")
        bad = os.path.join(tmp, "bad.txt")
        with open(bad, "w") as f:
            f.write("# layers 5 kv_heads 4\n0 0 streaming 0.9 0.5\n")
        p = run(["bench", "ppl", "--model", MODEL, "--tokenizer", TOK, "--text", STORY, "--methods", "sink-window",
                 "--budget", "50%f16", "--head-profile", bad, "--quiet"])
        expect(p.returncode == 2 and "layer 0 head 1 is missing" in p.stderr, "a missing head is named")
        with open(bad, "w") as f:
            f.write("# layers 2 kv_heads 1\n0 0 streaming 0.9 0.5\n1 0 diffuse 0.5 0.2\n")
        p = run(["bench", "ppl", "--model", MODEL, "--tokenizer", TOK, "--text", STORY, "--methods", "sink-window",
                 "--budget", "50%f16", "--head-profile", bad, "--quiet"])
        expect("another model" in p.stdout, "a profile of another model is refused (n/a, with the reason)")
        p = run(["bench", "ppl", "--model", MODEL, "--tokenizer", TOK, "--text", STORY, "--head-profile", prof])
        expect(p.returncode == 2 and "P%f16" in p.stderr, "head-wise budgets need a byte budget (P%f16)")


# ---- issue 27: inputs that gave a wrong result with exit status 0 ----

def tiny(tmp, name="m.gguf", **kw):
    return write(tmp, name, tiny_llama(**kw))


def case_gguf_tokenizer_long_pretoken():
    """A pre-token over 1,000 bytes lost its tail: 'kvc ppl' on a 10 MB file scored 249 tokens and exited 0."""
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny(tmp, ctx=4096)
        text = write(tmp, "t.txt", b"a" * 3000 + b" the end")
        p = run(["ppl", "--model", model, "--text", text, "--method", "exact", "--budget", "4096"])
        # 3,008 bytes, no merge applies to a run of 'a': one token a byte but the merged " the"
        expect(p.returncode == 0 and "tokens=3004 " in p.stdout, "every byte of a 3,000-byte pre-token is scored")


def case_gguf_tokenizer_refuses_missing_byte():
    """A byte the vocabulary has no token for became token 0 (<|endoftext|>) with exit 0."""
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny(tmp, missing=(0xFF,))
        text = write(tmp, "t.txt", b"Hello there \xff and the rest of a sentence that goes on.")
        p = run(["ppl", "--model", model, "--text", text, "--method", "exact", "--budget", "64"])
        expect(p.returncode != 0 and "byte 12 (0xff) has no token" in p.stderr and text in p.stderr,
               "refused in one line naming the file and the byte's offset")
        p = run(["generate", "--model", model, "--prompt", "caf\xc3\xa9 \xff", "--steps", "4"])
        expect(p.returncode == 0, "a prompt of valid UTF-8 the vocabulary holds is fine (0xff here comes as U+00FF)")


def case_text_with_nul_refused():
    """A NUL byte silently ended a --text file (106 of 511 tokens scored)."""
    need_model()
    with tempfile.TemporaryDirectory() as tmp:
        text = write(tmp, "nul.txt", open(STORY, "rb").read()[:400] + b"\0" + b"more text after the NUL byte")
        p = run(["ppl", "--model", MODEL, "--tokenizer", TOK, "--text", text, "--method", "exact", "--budget", "512"])
        expect(p.returncode != 0 and "byte 400 is a NUL byte" in p.stderr, "refused naming the offset")


def case_ppl_short_text():
    """'kvc ppl' refused every text under 66 tokens with a message about an exact budget never set."""
    need_model()
    with tempfile.TemporaryDirectory() as tmp:
        text = write(tmp, "short.txt", b"Once upon a time there was a cat.")
        for method in ("exact", "uniform", "h2o"):
            p = run(["ppl", "--model", MODEL, "--tokenizer", TOK, "--text", text, "--method", method,
                     "--budget", "256"])
            expect(p.returncode == 0 and "perplexity=" in p.stdout, method + " scores a short text")


def case_nonfinite_logits_stop():
    """Logits were never checked: nll=nan with exit 0, greedy decoding picked token 0 on a NaN."""
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny(tmp, scale=1e10, seed=3)  # finite weights whose activations leave float's range
        for args in (["logits", "--model", model, "--tokens", "1,2,3"],
                     ["generate", "--model", model, "--prompt", "the", "--steps", "3"],
                     ["ppl", "--model", model, "--text", STORY, "--method", "exact", "--budget", "128"]):
            p = run(args)
            expect(p.returncode != 0 and "layer 0 at position 0 left float's range" in p.stderr,
                   args[0] + " stops naming the layer and the position")


def case_flags_that_would_be_ignored():
    """Flags that did nothing were accepted in silence."""
    need_model()
    with tempfile.TemporaryDirectory() as tmp:
        expect(run(["dump", "--model", MODEL, "--tokenizer", TOK, "--steps", "100", "--out", tmp]).returncode == 0,
               "dump")
        trace = os.path.join(tmp, "L0")
        p = run(["eval", "--trace", trace, "--method", "h2o", "--budget", "64", "--subgen-t", "4"])
        expect(p.returncode == 2 and "--subgen-t does not apply to method h2o (it tunes subgen)" in p.stderr,
               "a method flag of another method")
        p = run(["oracle", "--trace", trace, "--method", "uniform", "--budget", ""])
        expect(p.returncode == 2 and "is empty" in p.stderr, "an empty --budget says so")
        p = run(["eval", "--trace", trace, "--method", "uniform", "--budget", "80", "--score-from", "100"])
        expect(p.returncode == 2 and "--score-from 100 is past the trace's last position" in p.stderr,
               "--score-from past the end (the metrics were NaN)")
        p = run(["methods"], env={"KVC_KERNELS": "bogus"})
        expect(p.returncode == 2 and "KVC_KERNELS=bogus names no kernel table" in p.stderr and " ref" in p.stderr,
               "an unknown forced kernel table, with the ones that run here")
        p = run(["logits", "--model", MODEL, "--tokens", ",".join(["1"] * 513)])
        expect(p.returncode == 2 and "the model's context is 512 positions" in p.stderr, "logits past the context")
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny(tmp)
        p = run(["generate", "--model", model, "--tokenizer", TOK, "--steps", "2"])
        expect(p.returncode != 0 and "carries its own tokenizer" in p.stderr, "--tokenizer with a GGUF model")


def case_gguf_loader_refuses():
    """The loader ran with a layer missing, allocated from metadata before checking shapes, took NaN weights."""
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(dict(layers=2, block_count=1), "belongs to layer 1, but llama.block_count says 1 layers"),
                 (dict(meta={"llama.embedding_length": 65536}), "token_embd.weight is missing or does not match"),
                 (dict(nan_at="blk.1.ffn_up.weight"), "'blk.1.ffn_up.weight' holds a non-finite weight (nan)"),
                 (dict(extra_tokens=3), "tokens but token_embd.weight only")]
        for i, (kw, msg) in enumerate(cases):
            model = tiny(tmp, "m%d.gguf" % i, **kw)
            p = run(["generate", "--model", model, "--steps", "2"], mem_gib=1)
            expect(p.returncode != 0 and msg in p.stderr, "refused: " + msg)


def case_ppl_offline_says_why():
    """kvc ppl --bkv-mode offline failed with a bare "capacity exhausted" (issue 49): it reads the
    text token by token, which that mode refuses; the refusal must say so."""
    need_model()
    p = run(["ppl", "--model", MODEL, "--tokenizer", TOK, "--text", STORY, "--method", "balancekv-prefill",
             "--budget", "128", "--bkv-mode", "offline"])
    expect(p.returncode != 0 and "offline" in p.stderr and "one token at a time" in p.stderr,
           "the offline mode's refusal says why (%s)" % p.stderr.strip()[-160:])


def exact_ppl_of(text, model, tok):
    """The exact model's teacher-forced perplexity of a text (kvc bench ppl, exact at 100%)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
    try:
        args = ["bench", "ppl", "--model", model, "--methods", "exact", "--budget", "100%", "--text", f.name,
                "--quiet", "-t", "1"] + (["--tokenizer", tok] if tok else [])
        p = run(args)
        m = re.search(r"^exact\s+([0-9.]+)", p.stdout, re.M)
        expect(p.returncode == 0 and m is not None, "exact perplexity of a generated text (%s)" % p.stderr[-200:])
        return float(m.group(1))
    finally:
        os.unlink(f.name)


def generated_text(out):
    """What kvc generate printed before its report (the prompt and the tokens after it)."""
    i = out.find("\n\n")
    return out[:i] if i >= 0 else out


def degeneration_sweep(model, tok, configs, steps, what):
    """Every method x configuration that kvc generate accepts must write text
    whose exact-model perplexity is at most 3x that of exact's own greedy
    text (the issue's goal; a method that lost its recent window wrote
    "Thedy. Thedy." at 58-123 against 1.6). Refused configurations pass:
    refusing is what a configuration that cannot work must do."""
    base = ["generate", "--model", model, "--steps", str(steps)] + (["--tokenizer", tok] if tok else [])
    ref = run(base + ["--method", "exact"])
    expect(ref.returncode == 0, what + ": exact generates")
    own = exact_ppl_of(generated_text(ref.stdout), model, tok)
    listed = run(["methods"])
    methods = [line.split()[0] for line in listed.stdout.splitlines() if line.strip() and not line.startswith("#")]
    checked = refused = 0
    worst = (0.0, "")
    for cfg in configs:
        for m in methods:
            p = run(base + ["--method", m] + cfg)
            if p.returncode != 0:
                refused += 1
                expect("kvc generate:" in p.stderr, "%s %s: refused with a reason" % (m, " ".join(cfg)))
                continue
            ppl = exact_ppl_of(generated_text(p.stdout), model, tok)
            checked += 1
            if ppl / own > worst[0]:
                worst = (ppl / own, m + " " + " ".join(cfg))
            expect(ppl <= 3.0 * own, "%s, %s %s: exact-model perplexity of its text %.3f <= 3 x %.3f" %
                   (what, m, " ".join(cfg), ppl, own))
    print("%s: %d accepted configurations checked, %d refused; worst %.2fx exact's own %.3f (%s)" %
          (what, checked, refused, worst[0], own, worst[1]))


def case_generate_does_not_degenerate():
    """Issue 49 item 6's check on stories260K: budget 48 with sinks 8 and
    window 8 in int8 and KIVI4 (where the window held no block and seven
    methods degenerated), and KIVI4 with a one-block window."""
    need_model()
    configs = [["--budget", "48", "--sink", "8", "--window", "8", "--dtype", d] for d in ("int8", "kivi4")]
    configs.append(["--budget", "96", "--sink", "8", "--window", "32", "--dtype", "kivi4"])
    degeneration_sweep(MODEL, TOK, configs, 200, "stories260K")


def case_generate_does_not_degenerate_smollm2():
    """The same on SmolLM2-135M ($KVC_SMOLLM2; skipped without it), 100 tokens."""
    path = os.environ.get("KVC_SMOLLM2", "")
    if not path or not os.path.exists(path):
        print("SKIP: KVC_SMOLLM2 not set")
        sys.exit(77)
    configs = [["--budget", "48", "--sink", "8", "--window", "8", "--dtype", d] for d in ("int8", "kivi4")]
    degeneration_sweep(path, None, configs, 100, "SmolLM2-135M")


if __name__ == "__main__":
    fn = globals().get("case_" + sys.argv[3])
    if fn is None:
        print("unknown case " + sys.argv[3])
        sys.exit(2)
    fn()
    print("PASS")
