"""`python -m training {data,train,export,all,trim-head,features,train-features,train-ppd} ...`: every trainer.

The distilled draft: data, train, export (all: the three in order, `make distill`), trim-head (give a
trained draft a head over the most frequent tokens). The feature draft: features (the target's hidden
states over the distillation data), train-features. PPD's prompt tokens: train-ppd. Each has --help."""

import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    stages = ("data", "train", "export", "all", "trim-head", "features", "train-features", "train-ppd")
    usage = f"usage: python -m training {{{','.join(stages)}}} [options]  (each stage has --help)"
    if argv[:1] in (["-h"], ["--help"]):
        print(usage + "\n\n" + __doc__)
        return 0
    if not argv or argv[0] not in stages:
        print(usage)
        return 2
    stage, rest = argv[0], argv[1:]
    if stage == "data":
        from .data import main as run
    elif stage == "train":
        from .train import main as run
    elif stage == "export":
        from .export import main as run
    elif stage == "trim-head":
        from .trim_head import main as run
    elif stage == "features":
        from .features import main as run
    elif stage == "train-features":
        from .feature_train import main as run
    elif stage == "train-ppd":
        from .ppd_train import main as run
    else:
        from .pipeline import main as run
    from .config import ConfigError

    try:
        return run(rest)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
