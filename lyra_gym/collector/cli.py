"""``lyra-gym profile`` (and ``python -m lyra_gym.collector``): measure and write a throughput profile.

Examples::

    # on a GPU machine: every model, mixed precision, a measured profile
    python -m lyra_gym.collector --device cuda --models all --amp --out measured.json
    # add that GPU type to the shipped built-in profile (no measuring; runs anywhere)
    python -m lyra_gym.collector --from-measured measured.json --merge-into builtin --out merged.json
    # CPU smoke run with the tiny model sizes
    lyra-gym profile --device cpu --tiny --models resnet18,ncf --steps 2 --warmup 1 --out /tmp/p.json
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from lyra_gym.model.profiles import ProfileError

__all__ = ["add_profile_arguments", "add_profile_parser", "run_profile", "main"]


def add_profile_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the collector's options to ``p`` (shared by ``lyra-gym profile`` and ``python -m``)."""
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default cuda)")
    p.add_argument("--models", default="all", help="comma-separated model keys, or 'all' (default all)")
    p.add_argument("--batch-sizes", default=None,
                   help="comma-separated per-worker batch sizes in items (images, sequences, utterances, pairs) "
                        "for every model; default: each model's own list (see lyra_gym/collector/models.py)")
    p.add_argument("--amp", action="store_true", help="mixed precision: autocast fp16 + GradScaler on CUDA, bf16 on CPU")
    p.add_argument("--steps", type=int, default=20, help="timed steps per batch size (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="untimed warm-up steps (default 5)")
    p.add_argument("--tiny", action="store_true", help="tiny model sizes (CPU smoke runs, tests)")
    p.add_argument("--no-inference", action="store_true", help="skip the inference-throughput timing")
    p.add_argument("--gpu-name", default=None,
                   help="GPU type key in the profile (default: from the device name, e.g. h200; 'cpu' on CPU)")
    p.add_argument("--allreduce", choices=("auto", "measure", "assume"), default="auto",
                   help="auto (default): measure with NCCL when >= 2 GPUs are visible, else assume; "
                        "measure: require it; assume: gradient bytes / assumed bandwidths")
    p.add_argument("--intra-gbps", type=float, default=None,
                   help="assumed in-server all-reduce bus bandwidth, GB/s (default 100, assumption)")
    p.add_argument("--inter-gbps", type=float, default=None,
                   help="assumed across-server all-reduce bus bandwidth, GB/s (default 50, assumption)")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and synthetic data (default 0)")
    p.add_argument("--cpu-threads", type=int, default=None,
                   help="torch intra-op threads during the run (default: torch's own; 1 avoids thread "
                        "oversubscription on a busy CPU)")
    p.add_argument("--from-measured", default=None, metavar="FILE",
                   help="skip measuring: take the measurements from a profile this collector wrote")
    p.add_argument("--merge-into", default=None, metavar="FILE",
                   help="add the measured GPU type to this profile ('builtin' = the shipped one) and write the "
                        "result to --out; other GPU types are kept")
    p.add_argument("--out", required=True, help="profile JSON to write")
    p.add_argument("--quiet", action="store_true", help="no per-batch progress lines")
    return p


def add_profile_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``profile`` on a ``lyra-gym`` sub-parser set; it calls :func:`run_profile`."""
    p = subparsers.add_parser("profile", help="measure model throughput on this machine and write a profile",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_profile_arguments(p)
    p.set_defaults(func=run_profile)
    return p


def _batch_sizes(text: str | None) -> list[int] | None:
    if text is None or not text.strip():
        return None
    sizes = []
    for item in text.split(","):
        item = item.strip()
        try:
            value = int(item)
        except ValueError:
            raise ProfileError(f"--batch-sizes: not an integer: {item!r}") from None
        if value < 1:
            raise ProfileError(f"--batch-sizes: must be >= 1, got {value}")
        sizes.append(value)
    return sizes


def _measure(args: argparse.Namespace, log) -> dict:
    import torch

    from lyra_gym.collector.benchmark import (BenchSettings, benchmark_models, environment_info, fit_ring_unit,
                                              measure_allreduce)
    from lyra_gym.collector.models import resolve_models
    from lyra_gym.collector.profile_writer import (ASSUMED_INTER_GBPS, ASSUMED_INTRA_GBPS, INTER_VS_INTRA,
                                                   AllreduceEstimate, assumed_allreduce, build_profile,
                                                   gpu_key_from_name)

    try:
        keys = resolve_models(args.models)
    except KeyError as err:
        raise ProfileError(f"--models: {err.args[0]}") from None
    batches = _batch_sizes(args.batch_sizes)
    try:
        device = torch.device(args.device)
    except RuntimeError:
        raise ProfileError(f"--device: unknown device {args.device!r} (use cuda, cuda:N or cpu)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ProfileError("--device cuda: CUDA is not available on this machine (use --device cpu --tiny for a smoke run)")
    if device.type not in ("cuda", "cpu"):
        raise ProfileError(f"--device: only cuda and cpu are supported, got {args.device!r}")
    try:
        settings = BenchSettings(device=args.device, amp=args.amp, steps=args.steps, warmup=args.warmup,
                                 tiny=args.tiny, inference=not args.no_inference, seed=args.seed)
    except ValueError as err:
        raise ProfileError(str(err)) from None
    env = environment_info(args.device)
    gpu_key = args.gpu_name or (gpu_key_from_name(env["gpu_name"]) if device.type == "cuda" else "cpu")

    threads = torch.get_num_threads()
    if args.cpu_threads is not None:
        if args.cpu_threads < 1:
            raise ProfileError(f"--cpu-threads: must be >= 1, got {args.cpu_threads}")
        torch.set_num_threads(args.cpu_threads)
    try:
        results = benchmark_models(keys, batches, settings, log)
    finally:
        torch.set_num_threads(threads)

    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    want_measure = args.allreduce == "measure" or (args.allreduce == "auto" and gpus >= 2)
    intra_gbps = ASSUMED_INTRA_GBPS if args.intra_gbps is None else args.intra_gbps
    inter_gbps = ASSUMED_INTER_GBPS if args.inter_gbps is None else args.inter_gbps
    if intra_gbps <= 0 or inter_gbps <= 0:
        raise ProfileError(f"--intra-gbps/--inter-gbps: must be > 0, got {intra_gbps}, {inter_gbps}")
    allreduce: dict[str, AllreduceEstimate] = {}
    if want_measure:
        if gpus < 2:
            raise ProfileError(f"--allreduce measure: needs >= 2 visible CUDA GPUs, found {gpus}")
        worlds = list(range(2, gpus + 1))
        log(f"all-reduce: NCCL over world sizes {worlds}")
        times = measure_allreduce({m.key: m.parameters for m in results}, worlds, backend="nccl")
        for m in results:
            unit = fit_ring_unit(times[m.key])
            allreduce[m.key] = AllreduceEstimate(
                unit, unit * INTER_VS_INTRA, "measured-nccl-intra",
                f"measured with NCCL inside one server over {gpus} GPUs (unit fitted to 2(n-1)/n); across "
                f"servers assumed {INTER_VS_INTRA:g}x that (not measurable on one machine)", times[m.key])
        ar_meta = {"method": "measured-nccl-intra", "world_sizes": worlds, "inter_vs_intra_assumed": INTER_VS_INTRA}
    else:
        for m in results:
            allreduce[m.key] = assumed_allreduce(m.grad_bytes, intra_gbps, inter_gbps)
        ar_meta = {"method": "assumed", "intra_gbps": intra_gbps, "inter_gbps": inter_gbps,
                   "note": "not measured (fewer than 2 GPUs visible, or --allreduce assume): "
                           "all-reduce unit = gradient bytes / assumed bus bandwidth"}
    metadata = {
        **env,
        "precision": settings.precision,
        "steps": settings.steps,
        "warmup": settings.warmup,
        "tiny": settings.tiny,
        "seed": settings.seed,
        "batch_sizes": {m.key: [b.batch for b in m.batches] for m in results},
        "sample_units": {m.key: m.sample_unit for m in results},
        "allreduce": ar_meta,
        "timing": "CUDA events per step, median" if device.type == "cuda" else "time.perf_counter per step, median",
        "cpu_threads": args.cpu_threads or threads,
    }
    for m in results:
        if not m.ok():
            log(f"warning: {m.key} left out of the profile: no batch size fit in memory")
    return build_profile(results, gpu_key, allreduce, metadata)


def run_profile(args: argparse.Namespace) -> int:
    """Measure (or read ``--from-measured``), optionally merge, write ``--out``; returns 0.

    :raises ProfileError: bad options, an unknown model key, an unusable device or profile
        (the ``lyra-gym`` entry point prints it and exits with status 2).
    """
    from lyra_gym.collector.profile_writer import load_profile_document, merge_profile, write_profile

    def log(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    if args.from_measured:
        measured = load_profile_document(args.from_measured)
        measured_source = args.from_measured
    else:
        measured = _measure(args, log)
        measured_source = f"measured {measured['metadata']['reference_gpu']} profile"
    doc = measured
    if args.merge_into:
        doc = merge_profile(load_profile_document(args.merge_into), measured, target_source=args.merge_into,
                            measured_source=measured_source)
    out = write_profile(doc, args.out)
    gpu = measured["metadata"]["reference_gpu"]
    print(f"{'model':>12}  {'local_batch':>11}  {'step_s':>9}  {'intra_s':>9}  {'inter_s':>9}  unit")
    for key, entry in doc["models"].items():
        timing = entry["gpus"].get(gpu)
        if timing is None:
            continue
        print(f"{key:>12}  {entry['local_batch']:>11g}  {timing['step_compute_s']:>9.4g}  "
              f"{timing['allreduce_intra_s']:>9.3g}  {timing['allreduce_inter_s']:>9.3g}  "
              f"{entry.get('sample_unit', '-')}")
    print(f"wrote {out} (GPU type {gpu!r})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m lyra_gym.collector`` (same options as ``lyra-gym profile``)."""
    parser = argparse.ArgumentParser(prog="python -m lyra_gym.collector", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_profile_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_profile(args)
    except (ProfileError, FileNotFoundError) as err:
        print(f"lyra_gym.collector: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
