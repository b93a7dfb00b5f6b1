"""minatar_protocols.py: a trained MinAtar run's policy played under four protocols,
{greedy, sampled} x {sticky actions 0.1, none}, in MinAtar's own Python `Environment`.

calf's results (README, issue 37) are greedy under MinAtar's rules (sticky actions 0.1);
gymnax's published PPO figures are the mean return of a sampled policy in gymnax's port,
which has no sticky actions. This puts one policy under each, side by side, so the two
can be compared on the same terms. MinAtar is not part of calf: fetch kenjyoung/MinAtar
and give its checkout (pure Python on Debian's NumPy).

    PYTHONPATH=build/python /usr/bin/python3 bench/minatar_protocols.py \\
        MINATAR_CHECKOUT RUN_DIR... [--episodes N] [--max_steps M]

Episode i of each protocol is MinAtar's `Environment(game, sticky_action_prob=p)` seeded
with 1000 + i (difficulty ramping on); the policy acts on the batch of episodes still
running (a -v1 run's action indexes MinAtar's `minimal_action_set()`, a -v0 run's the full
set). Sampling draws from calf's stream (seed 7, row), as `calf.Policy` documents. An
episode still running after M steps (default 100,000) is stopped and counted as it
stands; the line says how many were.
"""

import argparse
import sys

import numpy as np


def play(pol, Environment, game, full_set, sticky, greedy, episodes, max_steps):
    envs = [Environment(game, sticky_action_prob=sticky, difficulty_ramping=True)
            for _ in range(episodes)]
    for i, e in enumerate(envs):
        e.seed(1000 + i)
        e.reset()
    aset = list(range(envs[0].num_actions())) if full_set else envs[0].minimal_action_set()
    ret = np.zeros(episodes)
    live = list(range(episodes))
    steps = 0
    while live and steps < max_steps:
        obs = np.stack([envs[i].state() for i in live]).astype(np.uint8)
        if greedy:
            act = pol(obs)
        else:
            act = pol(obs, deterministic=False, seed=7) if steps == 0 else pol(obs, deterministic=False)
        still = []
        for i, a in zip(live, act):
            r, done = envs[i].act(aset[int(a)])
            ret[i] += r
            if not done:
                still.append(i)
        live = still
        steps += 1
    return ret, len(live)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("minatar", help="a checkout of kenjyoung/MinAtar")
    ap.add_argument("runs", nargs="+", help="calf run dirs (--root_dir) of MinAtar games")
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--max_steps", type=int, default=100000)
    args = ap.parse_args()
    sys.path.insert(0, args.minatar)
    import calf
    from minatar import Environment

    print(f"{'run':28s} {'protocol':20s} {'mean':>8s} {'min':>6s} {'median':>7s} {'max':>6s}")
    for run in args.runs:
        pol = calf.load_policy(run)
        name = pol.env_name  # MinAtar/Breakout-v1
        if not name.startswith("MinAtar/"):
            sys.exit(f"minatar_protocols.py: {run}: {name} is not a MinAtar game")
        game, version = name[len("MinAtar/"):].split("-v")
        game = "space_invaders" if game == "SpaceInvaders" else game.lower()
        for greedy in (True, False):
            for sticky in (0.1, 0.0):
                ret, cut = play(pol, Environment, game, version == "0", sticky, greedy,
                                args.episodes, args.max_steps)
                proto = f"{'greedy' if greedy else 'sampled'}, sticky {sticky:.1f}"
                note = f"  ({cut} stopped at {args.max_steps} steps)" if cut else ""
                print(f"{run.rstrip('/').split('/')[-1]:28s} {proto:20s} {ret.mean():8.2f} "
                      f"{ret.min():6.0f} {np.median(ret):7.1f} {ret.max():6.0f}{note}", flush=True)


if __name__ == "__main__":
    main()
