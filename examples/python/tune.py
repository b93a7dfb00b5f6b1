"""A hyperparameter search with Optuna over calf.Trainer: PPO on CartPole-v1 by default.

    python3 examples/python/tune.py [--root runs/tune] [--trials 20] [--jobs N]
                                    [--timesteps 50000] [--env CartPole-v1] [--seed 1]

Each trial trains calf's PPO with the hyperparameters Optuna proposes (SB3's names, as
calf.Trainer takes them), reports each iteration's average training return, and is
pruned (Optuna's median rule) when it lags the trials before it at the same iteration;
its value is the greedy policy's average return over 10 evaluation episodes after the
last iteration. Trials run in parallel, one process per job (calf runs one trainer at a
time per process), sharing one study in ROOT/study.db (SQLite). Each trial's run dir is
named by its parameters and the seed, ROOT/<name>: the same parameters train the same
bytes there, so a search run again finds the finished trials done, resumes the
unfinished ones, and ``train_trial`` repeats any trial exactly.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import pathlib
import sys
import time
from typing import Any, Callable

import calf

EVAL_EPISODES = 10


def suggest(trial: Any) -> dict[str, Any]:
    """The search space, by SB3's and CleanRL's names (calf.Trainer maps them onto calf's
    bindings: num_minibatches is CleanRL's, the rollout of 8 envs split into that many)."""
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 3e-3, log=True),
        "n_steps": trial.suggest_categorical("n_steps", [16, 32, 64]),
        "num_minibatches": trial.suggest_categorical("num_minibatches", [1, 2, 4, 8]),
        "n_epochs": trial.suggest_int("n_epochs", 2, 20),
        "gamma": trial.suggest_categorical("gamma", [0.98, 0.99, 0.999]),
        "gae_lambda": trial.suggest_categorical("gae_lambda", [0.8, 0.9, 0.95]),
        "ent_coef": trial.suggest_categorical("ent_coef", [0.0, 0.001, 0.01]),
    }


def run_name(params: dict[str, Any], seed: int) -> str:
    """The run dir's name: every parameter and the seed, so it names one run."""
    parts = [f"{k}={params[k]:.6g}" if isinstance(params[k], float) else f"{k}={params[k]}"
             for k in sorted(params)]
    return "_".join([*parts, f"seed={seed}"])


def train_trial(params: dict[str, Any], root: pathlib.Path, *, env: str, timesteps: int,
                seed: int, report: Callable[[int, float], bool] | None = None) -> float:
    """Train one trial's run in root/<run_name> and return its evaluation's average
    return. ``report(iteration, average_return)`` after each iteration that ended an
    episode; True stops the run there (pruned: NaN is returned)."""
    run = root / run_name(params, seed)
    with calf.Trainer(algorithm="ppo", env=env, total_timesteps=timesteps, seed=seed,
                      root_dir=run, n_envs=8, n_eval_episodes=EVAL_EPISODES,
                      overrides={"TrainerConfig.evaluate": True,
                                 "TrainerConfig.eval_interval": 10**9,
                                 "TrainerConfig.num_checkpoints": 1},
                      **params) as t:
        while not t.done:
            m = t.step()
            if report and not math.isnan(m["average_return"]) and report(
                    m["iteration"], m["average_return"]):
                return math.nan
    # the evaluation after the last iteration, also when an earlier search finished it
    return float(calf.read_scalars(run)["eval"]["Metrics/AverageReturn"].values[-1])


def _work(args: argparse.Namespace, worker: int, n_trials: int) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name="calf", storage=f"sqlite:///{args.root}/study.db",
                              sampler=optuna.samplers.TPESampler(seed=args.seed * 1000 + worker),
                              pruner=optuna.pruners.MedianPruner(n_startup_trials=args.startup))

    def objective(trial: Any) -> float:
        params = suggest(trial)

        def report(iteration: int, value: float) -> bool:
            trial.report(value, iteration)
            return trial.should_prune()

        value = train_trial(params, args.root, env=args.env, timesteps=args.timesteps,
                            seed=args.seed, report=report)
        if math.isnan(value):
            raise optuna.TrialPruned()
        return value

    study.optimize(objective, n_trials=n_trials)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=pathlib.Path, default=pathlib.Path("runs/tune"))
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timesteps", type=int, default=50_000)
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--startup", type=int, default=5, help="trials before any is pruned")
    args = p.parse_args()
    import optuna

    args.root.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(study_name="calf", storage=f"sqlite:///{args.root}/study.db",
                                direction="maximize", load_if_exists=True)
    start = time.perf_counter()
    jobs = max(1, min(args.jobs, args.trials))
    # calf runs one trainer at a time per process: a process per job, the trials shared
    spawn = multiprocessing.get_context("spawn")
    procs = [spawn.Process(target=_work,
                           args=(args, k, args.trials // jobs + (k < args.trials % jobs)))
             for k in range(jobs)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    if any(proc.exitcode for proc in procs):
        sys.exit(f"tune.py: a worker failed (exit codes {[proc.exitcode for proc in procs]})")
    elapsed = time.perf_counter() - start
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    for t in sorted(study.trials, key=lambda t: t.number):
        value = "pruned" if t.state == optuna.trial.TrialState.PRUNED else f"{t.value:.1f}"
        print(f"trial {t.number}: {value} {run_name(t.params, args.seed)}")
    print(f"{len(study.trials)} trials ({len(done)} complete, {len(pruned)} pruned) on "
          f"{jobs} processes in {elapsed:.0f} s")
    if done:
        best = study.best_trial
        print(f"best: {best.value:.1f} {run_name(best.params, args.seed)}")


if __name__ == "__main__":
    main()
