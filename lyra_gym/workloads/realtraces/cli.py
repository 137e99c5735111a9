"""``lyra-gym trace convert``: its parser and what it runs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lyra_gym.workloads.realtraces.assemble import DEFAULT_ELASTIC_SHARE
from lyra_gym.workloads.realtraces.dispatch import FORMATS, load_real_trace
from lyra_gym.workloads.realtraces.pollux import POLLUX_GPUS_PER_NODE, load_pollux
from lyra_gym.workloads.trace import TraceError, write_trace


def _parse_mix(text: str) -> dict[str, float]:
    mix = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--model-mix: expected KEY=PROBABILITY, got {item.strip()!r}")
        try:
            mix[key.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--model-mix: not a number for {key.strip()!r}: {value.strip()!r}") from None
    return mix


def add_convert_parser(trace_subparsers: Any) -> argparse.ArgumentParser:
    """Register ``convert`` under ``lyra-gym trace``; it calls :func:`run_convert`."""
    c = trace_subparsers.add_parser(
        "convert", help="convert a downloaded public trace (Philly, Helios, Alibaba PAI) or a Pollux "
                        "artifact workload to a trace CSV",
        description="Convert a public production trace to this project's trace CSV. Traces do not name "
                    "models or elasticity: both are seeded draws (see lyra_gym/workloads/realtraces/). A Pollux "
                    "workload (petuum/adaptdl osdi21-artifact, simulator/workloads/workload-N.csv) names "
                    "both and converts deterministically.")
    c.add_argument("--format", required=True, choices=FORMATS)
    c.add_argument("--in", dest="input", required=True,
                   help="Philly cluster_job_log, Helios cluster_log.csv, PAI pai_job_table.csv, or a Pollux "
                        "workload-N.csv")
    c.add_argument("--in2", dest="input2", default=None, help="PAI pai_task_table.csv (alibaba only)")
    c.add_argument("--out", required=True,
                   help="trace CSV to write (atomically); never one of the inputs, overwrite or not")
    c.add_argument("--overwrite", action="store_true", help="replace an existing --out file (default: refuse)")
    c.add_argument("--seed", type=int, default=0,
                   help="seed of the model and elastic draws (default 0; pollux has no draws)")
    c.add_argument("--elastic-share", type=float, default=None,
                   help=f"probability that a job is elastic (default {DEFAULT_ELASTIC_SHARE}; not for pollux)")
    c.add_argument("--model-mix", default=None,
                   help="KEY=P,KEY=P,... over the profile's model keys (default: the presets' mix; not for pollux)")
    c.add_argument("--profiles", default=None,
                   help="profile JSON whose model keys to draw from (default: built-in); for pollux, the "
                        "profile whose reference-GPU throughput sets the durations")
    c.add_argument("--gpus-per-server", type=int, default=None,
                   help=f"pollux only: GPUs per reference server the durations assume (default "
                        f"{POLLUX_GPUS_PER_NODE}, the artifact's nodes)")
    c.set_defaults(func=run_convert)
    return c


def run_convert(args: argparse.Namespace) -> int:
    """Convert ``args.input`` (and ``args.input2``) to ``args.out``; returns 0, or 2 on a bad option.

    ``--out`` follows the output rule (:mod:`lyra_gym.outputs`), checked after the options and
    before reading: an existing file needs ``--overwrite``, an input (symbolic links followed)
    is always refused, and the file is written atomically. Malformed input, or an input of
    which no job is kept (nothing is written), raises :class:`TraceError` (the ``lyra-gym``
    entry point prints it).
    """
    from lyra_gym.outputs import atomic_path, check_out_file

    try:
        if args.seed < 0:
            raise ValueError(f"--seed {args.seed}: must be >= 0")
        if args.format != "pollux" and args.gpus_per_server is not None:
            raise ValueError(f"--gpus-per-server is only used with --format pollux, not {args.format}")
        if args.format not in ("alibaba", "pai") and args.input2:
            raise ValueError(f"--in2 is only used with --format alibaba, not {args.format}")
        if args.format == "pollux":
            for flag, value in (("--model-mix", args.model_mix), ("--elastic-share", args.elastic_share)):
                if value is not None:
                    raise ValueError(f"{flag} is not used with --format pollux: its workloads name the "
                                     f"application and every job's elasticity follows the artifact")
            gps = POLLUX_GPUS_PER_NODE if args.gpus_per_server is None else args.gpus_per_server
            if gps < 1:
                raise ValueError(f"--gpus-per-server {gps}: must be >= 1")
        else:
            mix = _parse_mix(args.model_mix) if args.model_mix else None
            share = DEFAULT_ELASTIC_SHARE if args.elastic_share is None else args.elastic_share
        out = check_out_file(args.out, getattr(args, "overwrite", False),
                             inputs={"--in": args.input, "--in2": args.input2, "--profiles": args.profiles})
        if args.format == "pollux":
            jobs = load_pollux(args.input, profiles=args.profiles, gpus_per_server=gps)
        else:
            known = None
            if args.profiles:
                from lyra_gym.model.profiles import load_profiles

                known = list(load_profiles(args.profiles).models)
            jobs = load_real_trace(args.format, args.input, args.input2, args.seed, model_mix=mix,
                                   elastic_share=share, known_models=known)
    except TraceError:
        raise
    except ValueError as err:
        print(f"lyra-gym: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    if not jobs:  # a header-only trace, which every loader refuses: write nothing
        skipped = ", ".join(f"{n} {why}" for why, n in jobs.skipped.items()) or "none"
        raise TraceError.whole_file(args.input, f"no job kept ({jobs.records} read; skipped: {skipped}); "
                                                f"nothing written to {args.out}")
    with atomic_path(out) as tmp:
        write_trace(jobs, tmp)
    print(jobs.summary())
    print(f"wrote {len(jobs)} jobs to {args.out}")
    return 0
