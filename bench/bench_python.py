"""bench_python.py: calf from Python against its references (issue 25, section 6).

1. calf.make_vec("CartPole-v1", 64) stepped from Python with NumPy actions, against
   Gymnasium's own SyncVectorEnv of 64 CartPole-v1 (pure Python on NumPy), both in the
   same-step autoreset mode calf implements; env steps per CPU-second of this thread.
2. calf.make_vec("HalfCheetah-v4", 64) from Python against build/bench_envs' bare
   physics loop (ctrl + 5 mj_steps over 64 mjData; no observation, reward or reset).
3. calf.train on examples/ppo_cartpole.gin against `calf train` of the same job
   (evaluation, checkpoints and summaries off, as bench_train trains), alternated in
   every repeat so the machine's slow spells fall on both; wall time.

Gymnasium is never part of calf: fetch its source beside the project and name it with
--gymnasium PATH or CALF_GYMNASIUM_PATH (a directory holding the gymnasium package,
e.g. `git clone --depth 1 https://github.com/Farama-Foundation/Gymnasium /tmp/gym`;
Gymnasium 1.x). Without it part 1 prints calf's rate alone.

usage: PYTHONPATH=build/python /usr/bin/python3 bench/bench_python.py [--gymnasium PATH]
           [--calf build/calf] [--bench_envs build/bench_envs] [--repeats 5]
           [--iterations 60] [--only cartpole,halfcheetah,train]
Run from the source dir (examples/ppo_cartpole.gin is read by relative path).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import calf

NUM_ENVS = 64
TABLE = 64  # distinct action rows, cycled, drawn once: the policy costs nothing


def cpu_rate(step, steps_per_call: int, min_seconds: float = 0.3) -> float:
    """Env steps per CPU-second of this thread over calls of step() lasting at least
    min_seconds (the machine is shared: CPU time, not wall time)."""
    calls = 0
    t0 = time.thread_time()
    while True:
        for _ in range(50):
            step(calls)
            calls += 1
        dt = time.thread_time() - t0
        if dt >= min_seconds:
            return calls * steps_per_call / dt


def median_rate(make, repeats: int) -> float:
    rates = []
    for _ in range(repeats):
        step = make()
        step(0)  # warm
        rates.append(cpu_rate(step, NUM_ENVS))
    return statistics.median(rates)


def calf_stepper(name: str):
    envs = calf.make_vec(name, NUM_ENVS, seed=1)
    envs.reset()
    rng = np.random.default_rng(7)
    space = envs.single_action_space
    if hasattr(space, "n"):
        table = rng.integers(space.n, size=(TABLE, NUM_ENVS))
    else:
        table = rng.uniform(space.low, space.high, (TABLE, NUM_ENVS, *space.shape)).astype(
            np.float32
        )

    def step(i: int) -> None:
        envs.step(table[i % TABLE])

    return step


def gym_stepper():
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    envs = SyncVectorEnv(
        [lambda: gym.make("CartPole-v1") for _ in range(NUM_ENVS)],
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
    envs.reset(seed=1)
    table = np.random.default_rng(7).integers(2, size=(TABLE, NUM_ENVS))

    def step(i: int) -> None:
        envs.step(table[i % TABLE])

    return step


def bench_cartpole(args: argparse.Namespace) -> None:
    rate = median_rate(lambda: calf_stepper("CartPole-v1"), args.repeats)
    print(f"CartPole-v1 x {NUM_ENVS}, env steps per CPU-second (median of {args.repeats}):")
    print(f"  calf.make_vec from Python      {rate / 1e6:10.3f} M/s")
    if args.gymnasium is None:
        print("  Gymnasium SyncVectorEnv        not run: no --gymnasium PATH or "
              "CALF_GYMNASIUM_PATH (see this file's header)")
        return
    sys.path.insert(0, args.gymnasium)
    try:
        import gymnasium
    except ImportError as e:
        sys.exit(f"bench_python: cannot import gymnasium from {args.gymnasium}: {e}")
    gym_rate = median_rate(gym_stepper, args.repeats)
    print(f"  Gymnasium {gymnasium.__version__} SyncVectorEnv {gym_rate / 1e6:10.3f} M/s")
    print(f"  calf / SyncVectorEnv           {rate / gym_rate:10.1f}x  (the issue asks >= 50x)")


def bench_halfcheetah(args: argparse.Namespace) -> None:
    if calf.features()["mujoco"] != "built in":
        print("HalfCheetah-v4: not run: this calf has no MuJoCo (" + calf.features()["mujoco"] + ")")
        return
    print(f"HalfCheetah-v4 x {NUM_ENVS}, k env steps per CPU-second (median of {args.repeats}):")
    if not args.bench_envs or not os.path.exists(args.bench_envs):
        rate = median_rate(lambda: calf_stepper("HalfCheetah-v4"), args.repeats)
        print(f"  calf.make_vec from Python      {rate / 1e3:10.1f}")
        print(f"  bare mj_step loop              not run: no {args.bench_envs} (build it)")
        return
    # ours before and after bench_envs, whose run takes turns with the machine's load:
    # their mean is read against the bare loop measured between them
    before = median_rate(lambda: calf_stepper("HalfCheetah-v4"), args.repeats)
    out = subprocess.run([args.bench_envs], check=True, capture_output=True, text=True).stdout
    after = median_rate(lambda: calf_stepper("HalfCheetah-v4"), args.repeats)
    m = re.search(r"bare mj_step loop, 64 mjData\s+([0-9.]+)", out)
    if not m:
        sys.exit(f"bench_python: {args.bench_envs} printed no HalfCheetah bare-loop line")
    bare = float(m.group(1)) * 1e3
    print(f"  calf.make_vec from Python      {before / 1e3:10.1f} before, {after / 1e3:.1f} after")
    print(f"  bare mj_step loop, 64 mjData   {bare / 1e3:10.1f}  ({args.bench_envs}, between)")
    print(f"  calf.make_vec / bare loop      {(before + after) / 2 / bare:10.2f}   "
          f"(the issue asks >= 0.9)")


# as bench_train trains: no evaluation, checkpoints or summaries to time
TRAIN_PARAMS = ["TrainerConfig.evaluate=False", "TrainerConfig.num_checkpoints=0",
                "TrainerConfig.summary_interval=1000000"]


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def bench_train(args: argparse.Namespace) -> None:
    conf = os.path.join("examples", "ppo_cartpole.gin")
    params = [*TRAIN_PARAMS, f"TrainerConfig.num_iterations={args.iterations}"]
    wall: dict[str, list[float]] = {"cli": [], "py": []}
    cpu: dict[str, list[float]] = {"cli": [], "py": []}
    tmp = tempfile.mkdtemp(prefix="bench_python.")
    try:
        for r in range(args.repeats):
            root = os.path.join(tmp, f"cli{r}")
            cmd = [args.calf, "train", "--quiet", "--root_dir", root, "--conf", conf]
            for p in params:
                cmd += ["--conf_param", p]
            t0, c0 = time.perf_counter(), children_cpu()
            subprocess.run(cmd, check=True)
            wall["cli"].append(time.perf_counter() - t0)
            cpu["cli"].append(children_cpu() - c0)
            root = os.path.join(tmp, f"py{r}")
            t0, c0 = time.perf_counter(), time.process_time()
            calf.train(conf, root_dir=root, overrides=params, quiet=True)
            wall["py"].append(time.perf_counter() - t0)
            cpu["py"].append(time.process_time() - c0)
    finally:
        shutil.rmtree(tmp)
    steps = args.iterations * 64 * 32  # ppo_cartpole: 64 envs x 32 steps an iteration
    med = statistics.median
    print(f"ppo_cartpole, {args.iterations} iterations, one process, median of {args.repeats} "
          f"(alternated), k env steps per second of CPU time (of wall time):")
    for key, what in (("cli", "calf train (its own process)"), ("py", "calf.train (this interpreter)")):
        print(f"  {what:30s} {steps / med(cpu[key]) / 1e3:8.1f}  ({steps / med(wall[key]) / 1e3:.1f})")
    ratios = [c / p for c, p in zip(cpu["cli"], cpu["py"])]
    print(f"  calf.train speed / CLI's       {med(ratios):8.3f}  (per repeat "
          f"{min(ratios):.3f}..{max(ratios):.3f}; wall time {med(wall['cli']) / med(wall['py']):.3f}; "
          f"the issue asks >= 0.95)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gymnasium", default=os.environ.get("CALF_GYMNASIUM_PATH"),
                    help="directory holding Gymnasium's gymnasium package (or CALF_GYMNASIUM_PATH)")
    ap.add_argument("--calf", default=os.path.join("build", "calf"))
    ap.add_argument("--bench_envs", default=os.path.join("build", "bench_envs"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--only", default="cartpole,halfcheetah,train")
    args = ap.parse_args()
    parts = {"cartpole": bench_cartpole, "halfcheetah": bench_halfcheetah, "train": bench_train}
    for name in args.only.split(","):
        if name not in parts:
            ap.error(f"--only: unknown part {name!r} (cartpole, halfcheetah, train)")
        parts[name](args)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
