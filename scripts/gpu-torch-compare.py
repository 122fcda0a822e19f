"""PyTorch's side of the GPU benchmarks of issue 7, in the CSV format of dep-gpu-bench:
matmul 8192x8192 f32, a chain of 10,000 dependent tiny ops in eager mode, and a tiny op whose
result is read on the host each time. Run by
scripts/gpu-check when torch with CUDA is installed."""
import time

import torch


def report(name, value, unit):
    print(f"{name},{value:.3f},{unit},{torch.cuda.get_device_name(0)},0")


def main():
    dev = torch.device("cuda:0")
    torch.backends.cuda.matmul.allow_tf32 = False  # f32 like cuBLAS sgemm in dep
    n = 8192
    a = torch.full((n, n), 0.5, device=dev)
    b = torch.full((n, n), 0.25, device=dev)
    a @ b
    torch.cuda.synchronize()
    iters = 5
    start = time.perf_counter()
    for _ in range(iters):
        a @ b
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / iters
    report("torch_matmul_8192_f32", 2 * n**3 / seconds / 1e12, "TFLOP/s")

    size = 64 << 20
    x = torch.ones(size, device=dev)
    y = torch.full((size,), 2.0, device=dev)
    x + y
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        x + y
    torch.cuda.synchronize()
    report("torch_elementwise_add_256MB", 3 * size * 4 / ((time.perf_counter() - start) / 20) / 1e9, "GB/s")

    n_ops = 10_000
    z = torch.zeros(4, device=dev)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n_ops):
        z = z + 1
    z.cpu()
    report("torch_chain_10000_tiny_us_per_op", (time.perf_counter() - start) * 1e6 / n_ops, "us")

    n_ops = 2_000
    start = time.perf_counter()
    for _ in range(n_ops):
        z = z + 1
        assert z[0].item() > 0
    report("torch_roundtrip_tiny_us_per_op", (time.perf_counter() - start) * 1e6 / n_ops, "us")
    start = time.perf_counter()
    for _ in range(n_ops):
        z.cpu()
    report("torch_download_idle_tiny_us", (time.perf_counter() - start) * 1e6 / n_ops, "us")


if __name__ == "__main__":
    main()
