"""Shared entry point of the study scripts: run one study of ``mesadyn reproduce``."""

from __future__ import annotations

import argparse
import sys


def main(study: str, argv: list[str] | None = None) -> int:
    """``python studies/<study>.py --out DIR [--quick] [--seed N]``: that study only."""
    from mesadyn.cli import main as cli_main
    from mesadyn.reproduce.studies import all_studies

    p = argparse.ArgumentParser(description=all_studies(False)[study].title)
    p.add_argument("--out", default=f"reproduce-{study}")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    args = ["reproduce", "--only", study, "--out", a.out, "--seed", str(a.seed)]
    if a.quick:
        args.append("--quick")
    return cli_main(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1]))
