#!/usr/bin/env python3
"""Greedy decoding for bench/table: a small decoder-only transformer (3 layers, d=256, 4 heads,
vocabulary 2048; weights from a fixed seed, fp32) generates --tokens tokens one at a time after
a fixed prompt, and reads each chosen token on the host (.item()) to append it to the sequence,
as a generation loop does to stream the text or stop at an end token: the host waits for the
GPU every step. There is no KV cache: each step runs the whole model over
  --context growing   the whole sequence so far (prompt and generated tokens), so every step's
                      shapes differ from the last one's (attention over 128 to 128+N-1
                      positions; cuBLAS picks other GEMM kernels at some lengths);
  --context window    the last --window tokens, at their positions in the sequence (the
                      prompt is at least that long, so every step has the same shapes).
Writes the generated token ids (one a line) to --out ("%p" in the name: the process id), each
token's time to --token-times, and
prints step_ms and iter_us per generated token (the first WARMUP_STEPS tokens excluded, as
bench/train_torch.py excludes its warmup steps), cpu_ms (the main thread's CPU time per token,
spinning in the waits included), device_free_mib and total_s (the whole run from the script's
first line: importing torch, CUDA's start-up, the model, warmup and decoding)."""
import argparse
import math
import os
import sys
import time

T_START = time.perf_counter()

# Deterministic cuBLAS needs this before CUDA initialises.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

WARMUP_STEPS = 20
VOCAB, D_MODEL, LAYERS, HEADS = 2048, 256, 3, 4
PROMPT = 128  # default prompt length (at least --window in window mode)


class Block(nn.Module):
    # Attention written out (no SDPA), as in bench/train_torch.py; no dropout (inference).
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, future):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(future, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


def sinusoid(n, d):
    """Fixed sinusoidal position encodings (n, d): no parameters, so the weights drawn from the
    seed are the same whatever the sequence length."""
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return pe


class Decoder(nn.Module):
    def __init__(self, max_len, max_ctx, vocab=VOCAB, d=D_MODEL, layers=LAYERS, heads=HEADS):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.register_buffer("pos", sinusoid(max_len, d), persistent=False)
        # True above the diagonal: the positions a query must not see
        self.register_buffer("future", torch.ones(max_ctx, max_ctx, dtype=torch.bool).triu(1),
                             persistent=False)

    def forward(self, idx, start):
        """Logits of the next token after idx (1, t), the tokens at positions start..start+t-1:
        the whole model over the t positions (no KV cache), the head over the last one only."""
        t = idx.shape[1]
        x = self.tok(idx) + self.pos[start:start + t]
        future = self.future[:t, :t]
        for blk in self.blocks:
            x = blk(x, future)
        return self.head(self.ln(x[:, -1]))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--context", choices=["growing", "window"], required=True,
                    help="growing: each step runs over the whole sequence so far; "
                         "window: over the last --window tokens")
    ap.add_argument("--window", type=int, default=128, metavar="W",
                    help="tokens each step sees with --context window (default 128)")
    ap.add_argument("--tokens", type=int, default=300, metavar="N",
                    help="tokens to generate, one step each (default 300; more than %d: the first "
                         "%d are not timed)" % (WARMUP_STEPS, WARMUP_STEPS))
    ap.add_argument("--prompt", type=int, default=None, metavar="P",
                    help="prompt length in tokens (fixed tokens from a seed; default %d, or W in "
                         "window mode where W is larger)" % PROMPT)
    ap.add_argument("--layers", type=int, default=LAYERS, metavar="L",
                    help="transformer blocks (default %d; the time per token grows with L)" % LAYERS)
    ap.add_argument("--out", metavar="FILE",
                    help="file for the generated token ids, one a line (%%p: the process id)")
    ap.add_argument("--token-times", metavar="FILE",
                    help="file for each token's time in microseconds, one a line (%%p: the process "
                         "id): where in a run the time goes (learning, a new kernel choice)")
    ap.add_argument("--device", default="cuda",
                    help="torch device (default cuda; cpu only checks the script: its times are "
                         "no GPU figures)")
    args = ap.parse_args(argv)
    if args.prompt is None:
        args.prompt = max(PROMPT, args.window) if args.context == "window" else PROMPT
    if args.tokens <= WARMUP_STEPS:
        ap.error("--tokens must exceed the %d warmup steps" % WARMUP_STEPS)
    if args.window < 1 or args.prompt < 1 or args.layers < 1:
        ap.error("--window, --prompt and --layers must be at least 1")
    if args.context == "window" and args.prompt < args.window:
        ap.error("--context window needs a prompt of at least --window tokens (fixed shapes)")
    return args


def main(argv=None):
    args = parse_args(argv)
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("error: decode_torch.py needs a CUDA GPU (torch.cuda.is_available() is False)")

    torch.manual_seed(0)
    torch.backends.cudnn.enabled = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    if hasattr(torch.utils, "deterministic"):
        # Filling every torch.empty with NaN would add kernels no real job runs.
        torch.utils.deterministic.fill_uninitialized_memory = False

    total = args.prompt + args.tokens
    # The weights are drawn on the CPU from the seed (the same on every machine), then moved.
    model = Decoder(total, total if args.context == "growing" else args.window,
                    layers=args.layers).eval().to(dev)
    g = torch.Generator().manual_seed(1234)
    ids = torch.empty(1, total, dtype=torch.long, device=dev)
    ids[0, :args.prompt] = torch.randint(0, VOCAB, (args.prompt,), generator=g).to(dev)

    tokens, n, t0, stamps = [], args.prompt, None, []
    with torch.no_grad():
        for i in range(args.tokens):
            if i == WARMUP_STEPS:
                t0, c0 = time.perf_counter(), time.thread_time()
            stamps.append(time.perf_counter())
            start = 0 if args.context == "growing" else n - args.window
            tok = model(ids[:, start:n], start).argmax(dim=-1).item()  # the host waits here
            # the next input comes from the host's value: one fill kernel, the token its
            # argument (`ids[0, n] = tok` copies a CPU scalar tensor in: a blocking copy, a
            # second wait)
            ids[0, n].fill_(tok)
            tokens.append(tok)
            n += 1
    if dev.type == "cuda":
        torch.cuda.synchronize()
    stamps.append(time.perf_counter())
    step_ms = (stamps[-1] - t0) * 1e3 / (args.tokens - WARMUP_STEPS)
    cpu_ms = (time.thread_time() - c0) * 1e3 / (args.tokens - WARMUP_STEPS)
    if args.out:
        with open(args.out.replace("%p", str(os.getpid())), "w") as f:
            f.writelines("%d\n" % v for v in tokens)
    if args.token_times:
        with open(args.token_times.replace("%p", str(os.getpid())), "w") as f:
            f.writelines("%.1f\n" % ((b - a) * 1e6) for a, b in zip(stamps, stamps[1:]))
    print("step_ms %.4f" % step_ms)
    print("iter_us %.3f" % (step_ms * 1e3))
    print("cpu_ms %.4f" % cpu_ms)
    if dev.type == "cuda":
        # what the device has left at the end: cugraft's graphs (held until exit) show here
        print("device_free_mib %.1f" % (torch.cuda.mem_get_info()[0] / 2**20))
    print("total_s %.3f" % (time.perf_counter() - T_START))


if __name__ == "__main__":
    main()
