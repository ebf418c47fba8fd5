#!/usr/bin/env python3
"""PyTorch workloads for bench/run: an MLP and a small GPT-style transformer trained with AdamW,
with the usual loss.item() every step. Modes: eager, graph (hand-made whole-iteration
torch.cuda.graph), compile (torch.compile) and compile-ro (mode="reduce-overhead").
Writes the per-step losses (repr of the float) to --out; prints step_ms and iter_us, and cpu_ms:
the main thread's CPU time per step (the host cost of submitting; it includes any spinning
while the host waits for the GPU, so it is the submission cost only with --sync-every 0)."""
import argparse
import math
import os
import sys
import time

# Deterministic cuBLAS needs this before CUDA initialises.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

WARMUP_STEPS = 20
N_BATCHES = 16  # distinct pre-generated batches, cycled (inputs live on the GPU, no H2D copies)


class MLP(nn.Module):
    def __init__(self, d_in=512, d_hidden=1024, n_classes=512, p=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, d_hidden), nn.GELU(), nn.Dropout(p),
            nn.Linear(d_hidden, d_hidden), nn.GELU(), nn.Dropout(p),
            nn.Linear(d_hidden, n_classes))

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


class Block(nn.Module):
    # Attention written out (no SDPA): its flash/efficient backward kernels are not deterministic.
    def __init__(self, d, heads, seq, p):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(p)
        self.register_buffer("causal", torch.ones(seq, seq, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = self.drop(att.masked_fill(~self.causal[:t, :t], float("-inf")).softmax(dim=-1))
        x = x + self.drop(self.proj((att @ v).transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class Transformer(nn.Module):
    def __init__(self, vocab=1024, d=256, layers=4, heads=4, seq=128, p=0.1):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.drop = nn.Dropout(p)
        self.blocks = nn.ModuleList(Block(d, heads, seq, p) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx, y):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))


def make_batches(kind, dev):
    g = torch.Generator(device=dev)
    g.manual_seed(1234)
    if kind == "mlp":
        xs = torch.randn(N_BATCHES, 64, 512, device=dev, generator=g)
        ys = torch.randint(0, 512, (N_BATCHES, 64), device=dev, generator=g)
        return xs, ys
    tokens = torch.randint(0, 1024, (N_BATCHES, 8, 129), device=dev, generator=g)
    return tokens[:, :, :-1].contiguous(), tokens[:, :, 1:].contiguous()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", choices=["mlp", "transformer"], required=True)
    ap.add_argument("--mode", choices=["eager", "graph", "compile", "compile-ro"], default="eager")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--sync-every", type=int, default=1, metavar="N",
                    help="read the loss on the host every N steps (loss.item(), the usual logging "
                         "loop); 0: never inside the loop, all losses are read after it")
    ap.add_argument("--out", required=True, help="file for the per-step losses (rank > 0: .rankN added)")
    ap.add_argument("--ddp", action="store_true", help="DistributedDataParallel, NCCL backend")
    ap.add_argument("--shape-change", metavar="RANK:STEP", default="",
                    help="from step STEP on, rank RANK trains on half batches (a different last stretch)")
    args = ap.parse_args()
    try:
        change_rank, change_step = map(int, args.shape_change.split(":")) if args.shape_change else (-1, 0)
    except ValueError:
        sys.exit("error: --shape-change wants RANK:STEP")
    if not torch.cuda.is_available():
        sys.exit("error: train_torch.py needs a CUDA GPU (torch.cuda.is_available() is False)")

    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    torch.backends.cudnn.enabled = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    if hasattr(torch.utils, "deterministic"):
        # Filling every torch.empty with NaN would add kernels no real job runs.
        torch.utils.deterministic.fill_uninitialized_memory = False

    rank, world = 0, 1
    dev = torch.device("cuda")
    if args.ddp:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
        if args.mode == "graph":
            sys.exit("error: --ddp with --mode graph is not supported here")
    if args.mode == "graph" and args.shape_change:
        sys.exit("error: --shape-change with --mode graph is not supported here")
    model = (MLP() if args.model == "mlp" else Transformer()).to(dev).train()
    xs, ys = make_batches(args.model, dev)
    if args.ddp:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index], bucket_cap_mb=1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01,
                            capturable=args.mode == "graph")
    if args.mode == "compile":
        fwd = torch.compile(model)
    elif args.mode == "compile-ro":
        fwd = torch.compile(model, mode="reduce-overhead")
    else:
        fwd = model

    if args.mode == "graph":
        step = graph_step(model, opt, xs, ys)
    else:
        def step(i):
            opt.zero_grad(set_to_none=True)
            b = (i * world + rank) % N_BATCHES
            rows = xs.shape[1] // 2 if rank == change_rank and i >= change_step else xs.shape[1]
            loss = fwd(xs[b, :rows], ys[b, :rows])
            loss.backward()
            opt.step()
            return loss.detach()

    losses, t0 = [], None
    for i in range(args.steps):
        if i == WARMUP_STEPS:
            t0, c0 = time.perf_counter(), time.thread_time()
        loss = step(i)
        if args.sync_every and (i + 1) % args.sync_every == 0:
            loss = loss.item() if torch.is_tensor(loss) else loss
        losses.append(loss)
    torch.cuda.synchronize()
    losses = [v.item() if torch.is_tensor(v) else v for v in losses]
    if t0 is None:
        sys.exit("error: --steps must exceed the %d warmup steps" % WARMUP_STEPS)
    step_ms = (time.perf_counter() - t0) * 1e3 / (args.steps - WARMUP_STEPS)
    cpu_ms = (time.thread_time() - c0) * 1e3 / (args.steps - WARMUP_STEPS)
    with open(args.out + (".rank%d" % rank if rank else ""), "w") as f:
        f.writelines(repr(v) + "\n" for v in losses)
    if args.ddp:
        torch.distributed.destroy_process_group()
    print("step_ms %.4f" % step_ms)
    print("iter_us %.3f" % (step_ms * 1e3))
    print("cpu_ms %.4f" % cpu_ms)
    # what the device has left at the end: cugraft's graphs (held until exit) show here
    print("device_free_mib %.1f" % (torch.cuda.mem_get_info()[0] / 2**20))


def graph_step(model, opt, xs, ys):
    """The hand-made reference: one whole iteration (forward, backward, AdamW) captured once;
    each step copies the batch into the static inputs, replays, and reads the loss."""
    static_x, static_y = xs[0].clone(), ys[0].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream, as capture requires
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            model(static_x, static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = model(static_x, static_y)
        static_loss.backward()
        opt.step()

    def step(i):
        static_x.copy_(xs[i % N_BATCHES])
        static_y.copy_(ys[i % N_BATCHES])
        graph.replay()
        return static_loss.item()
    return step


if __name__ == "__main__":
    main()
