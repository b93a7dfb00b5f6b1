#!/usr/bin/env python3
"""Record the reference data tests/test_minatar.c replays (needs MinAtar only to re-record).

    python3 tests/data/minatar/record.py MINATAR_DIR

MINATAR_DIR is a checkout of kenjyoung/MinAtar v1.0.15 (its `minatar` package is imported
from there; only NumPy is needed, as Debian ships it). Writes, beside this script:

- mt19937.txt: numpy.random.RandomState(K)'s draws that MinAtar makes (raw 32-bit outputs,
  rand(), randint over several bounds), one `op value` line each under `K k`.
- <Game>-v0.txt, <Game>-v1.txt: whole episodes of Environment(game) seeded with seed(K),
  sticky actions on, under recorded actions (in the id's action set; -v1's map to the
  game's minimal set as MinAtar's Gymnasium wrapper maps them): random for even K, a
  scripted player with random slips for odd K. Lines:
      K k           a fresh Environment(game), seed(k) (last action 0)
      R crc         reset(); crc: CRC-32 of state() as uint8 bytes, (row, column, channel)
      S a r t crc   act(): the action, the reward, the terminal flag, CRC-32 of state()
"""
import os
import sys
import zlib

import numpy as np

GAMES = ["asterix", "breakout", "freeway", "seaquest", "space_invaders"]
SEEDS = [0, 1, 7, 2024, 4294967295]  # MinAtar's seed(K) values, one run each
EPISODES = {"freeway": 1}  # per run; Freeway's are 2,500 frames each
DEFAULT_EPISODES = 20
HERE = os.path.dirname(os.path.abspath(__file__))


def crc(state):
    return zlib.crc32(np.ascontiguousarray(state, dtype=np.uint8).tobytes())


# Scripted players for odd K, nine moves in ten (else the random action a stays): they
# reach what random play rarely does (Breakout's refill, Freeway's crossings, Space
# Invaders' new waves, Seaquest's surfacing with divers). Each returns a full action.
def where(plane):
    ys, xs = np.nonzero(plane)
    return (int(ys[0]), int(xs[0])) if len(ys) else (0, 0)


def breakout_player(state, a, policy):
    if policy.rand() < 0.05:
        return a
    (y, x), (ty, tx) = where(state[:, :, 1]), where(state[:, :, 2])
    dx, dy = x - tx or 1, y - ty
    while dy > 0 and y < 8:  # where the ball comes down, off the side walls
        x, y = x + dx, y + 1
        if not 0 <= x <= 9:
            x, dx = min(max(x, 0), 9), -dx
    paddle = int(np.argmax(state[9, :, 0]))
    return 0 if x == paddle else 1 if x < paddle else 3  # n, l, r


def asterix_player(state, a, policy):
    if policy.rand() < 0.1:
        return a
    py, px = where(state[:, :, 0])
    moves = {0: (py, px), 1: (py, px - 1), 2: (py - 1, px), 3: (py, px + 1), 4: (py + 1, px)}
    safe = []
    for act, (y, x) in moves.items():
        if not (1 <= y <= 8 and 0 <= x <= 9):
            continue
        enemy = np.flatnonzero(state[y, :, 1])
        if len(enemy) and abs(int(enemy[0]) - x) <= 2:
            continue
        safe.append(act)
    return safe[policy.randint(len(safe))] if safe else a


def freeway_player(state, a, policy):
    return 2 if policy.rand() < 0.9 else a  # up


def space_invaders_player(state, a, policy):
    if policy.rand() < 0.1:
        return a
    cannon = int(np.argmax(state[9, :, 0]))
    if state[5:9, cannon, 5].any():  # a bullet is coming down: step aside
        return 1 if cannon > 0 and not state[7:9, cannon - 1, 5].any() else 3
    cols = np.flatnonzero(state[:, :, 1].any(axis=0))
    target = int(cols[np.argmin(abs(cols - cannon))]) if len(cols) else cannon
    if target == cannon or policy.rand() < 0.5:
        return 5  # fire
    return 1 if target < cannon else 3


def seaquest_player(state, a, policy):
    if policy.rand() < 0.1:
        return a
    oxygen, divers = state[9, :, 7].sum(), state[9, :, 8].sum()
    if oxygen < 4 or divers >= 6:
        return 2  # up to the surface
    sy, sx = where(state[:, :, 0])
    ys, xs = np.nonzero(state[:, :, 9])
    if len(ys) and policy.rand() < 0.7:  # after the nearest diver
        i = int(np.argmin(abs(ys - sy) + abs(xs - sx)))
        if ys[i] != sy:
            return 4 if ys[i] > sy else 2
        return 3 if xs[i] > sx else 1
    return [5, 5, 1, 3, 4, 4][policy.randint(6)]  # fire, sideways, down


SCRIPTS = {"asterix": asterix_player, "breakout": breakout_player, "freeway": freeway_player,
           "space_invaders": space_invaders_player, "seaquest": seaquest_player}


def record_mt(path):
    lines = ["# numpy %s RandomState draws: K k, then op value lines" % np.__version__]
    for k in [0, 1, 5489, 123456789, 4294967295]:
        rs = np.random.RandomState(k)
        lines.append("K %d" % k)
        ops = np.random.RandomState(k ^ 0x5A5A).randint(0, 4, size=700)
        for op in ops:  # 700 ops cross at least one regeneration of the 624-word key
            if op == 0:
                lines.append("u32 %d" % rs.randint(0, 2**32, dtype=np.int64))
            elif op == 1:
                lines.append("rand %s" % float(rs.rand()).hex())
            elif op == 2:
                n = int(np.random.RandomState(len(lines)).randint(1, 12))
                lines.append("randint 0 %d %d" % (n, rs.randint(n)))
            else:
                lines.append("randint 1 9 %d" % rs.randint(low=1, high=9))
        lines.append("randint8 1 6 %s" % " ".join(str(v) for v in rs.randint(1, 6, 8)))
        lines.append("rand8 %s" % " ".join(float(v).hex() for v in rs.rand(8)))
        lines.append("u32 %d" % rs.randint(0, 2**32, dtype=np.int64))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def record_game(game, minimal, path):
    from minatar import Environment

    title = game.title().replace("_", "")
    lines = ["# MinAtar 1.0.15 %s-v%d: K k / R crc / S action reward terminal crc" % (title, minimal)]
    for k in SEEDS[:3] if game == "freeway" else SEEDS:
        env = Environment(game)
        env.seed(k)
        actions = env.minimal_action_set() if minimal else list(range(env.num_actions()))
        policy = np.random.RandomState(k ^ 0xC0FFEE)
        lines.append("K %d" % k)
        a = 0
        for _ in range(EPISODES.get(game, DEFAULT_EPISODES)):
            env.reset()
            lines.append("R %d" % crc(env.state()))
            terminal = False
            while not terminal:
                if policy.rand() < 0.5:  # random, with runs so the agent gets somewhere
                    a = int(policy.randint(len(actions)))
                if k % 2 and game in SCRIPTS:  # odd K: a scripted player reaches further
                    a = actions.index(SCRIPTS[game](env.state(), actions[a], policy))
                reward, terminal = env.act(actions[a])
                lines.append("S %d %d %d %d" % (a, int(reward), int(terminal), crc(env.state())))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.path.insert(0, sys.argv[1])
    record_mt(os.path.join(HERE, "mt19937.txt"))
    only = os.environ.get("MINATAR_GAMES")
    for game in GAMES:
        if only and game not in only.split(","):
            continue
        title = game.title().replace("_", "")
        for minimal in (0, 1):
            record_game(game, minimal, os.path.join(HERE, "%s-v%d.txt" % (title, minimal)))


if __name__ == "__main__":
    main()
