import re, sys
cats = [("OpenBLAS kernel", r"sgemm_kernel"), ("OpenBLAS packing", r"sgemm_(on|ot|in|it)copy|sgemm_beta"),
        ("page faults (kernel)", r"\[k\]"), ("memset/memcpy", r"mem(set|move|cpy)"), ("RoPE", r"rope|rotate_rows"),
        ("attention kernel", r"attention|forward<float>|backward<float>|tile_|weigh_row|exp_shifted|KeptProb"),
        ("exp/sigmoid (SLEEF, σ, SwiGLU, gate)", r"Sleef|sigmoid|swiglu"),
        ("RMSNorm", r"rms_norm"), ("AdamW", r"adamw"), ("cross-entropy", r"cross_entropy"),]
for f in sys.argv[1:]:
    tot = {c: 0.0 for c, _ in cats}; tot["other"] = 0.0
    for line in open(f):
        m = re.match(r"\s*([0-9.]+)%\s+(.*)", line)
        if not m: continue
        p, sym = float(m.group(1)), m.group(2)
        for c, rx in cats:
            if re.search(rx, sym): tot[c] += p; break
        else: tot["other"] += p
    print(f, {k: round(v, 1) for k, v in tot.items()})
