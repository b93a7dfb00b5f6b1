"""What the pytest suites share about training runs: the calf program ctest names in
CALF_BINARY, the CartPole config, a four-iteration job written both as calf.Trainer /
calf.train overrides and as `calf train --conf_param`s, and the checkpoints' bytes."""

from __future__ import annotations

import os
import pathlib
import subprocess

CALF = os.environ.get("CALF_BINARY", "calf")
SRC = pathlib.Path(__file__).resolve().parents[2]
CARTPOLE = SRC / "examples" / "ppo_cartpole.gin"

# four iterations, evaluations on 2 and 4, checkpoints spread over the run, in the shape
# the example had before its re-tune to 8 envs (64 envs, minibatch 512, 4 epochs, a
# constant learning rate), which these tests were written for
OVERRIDES = {
    "create_environment.num_parallel_environments": 64,
    "TrainerConfig.mini_batch_size": 512,
    "TrainerConfig.num_updates_per_train_iter": 4,
    "Adam.lr_schedule": "constant",
    "TrainerConfig.num_iterations": 4,
    "TrainerConfig.eval_interval": 2,
    "TrainerConfig.num_eval_episodes": 2,
    "TrainerConfig.num_checkpoints": 2,
    "Adam.lr": 3e-4,
}
# the same, as written for `calf train --conf_param`
CONF_PARAMS = [
    "create_environment.num_parallel_environments=64",
    "TrainerConfig.mini_batch_size=512",
    "TrainerConfig.num_updates_per_train_iter=4",
    "Adam.lr_schedule='constant'",
    "TrainerConfig.num_iterations=4",
    "TrainerConfig.eval_interval=2",
    "TrainerConfig.num_eval_episodes=2",
    "TrainerConfig.num_checkpoints=2",
    "Adam.lr=3e-4",
]


def calf_train(root: pathlib.Path, params: list[str], conf: pathlib.Path = CARTPOLE,
               nproc: int = 1) -> None:
    """`calf train --quiet` of conf with params as --conf_params, on nproc processes."""
    cmd = [CALF, "train", "--quiet", "--root_dir", str(root), "--conf", str(conf),
           "--nproc", str(nproc)]
    for p in params:
        cmd += ["--conf_param", p]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def checkpoints(root: pathlib.Path) -> dict[str, bytes]:
    """A run's checkpoint files by name, their bytes."""
    d = root / "train" / "algorithm"
    return {p.name: p.read_bytes() for p in sorted(d.glob("ckpt-*"))}


def checkpoint_path(root: pathlib.Path | str, n: int) -> pathlib.Path:
    """ROOT/train/algorithm/ckpt-N, the checkpoint of iteration n."""
    return pathlib.Path(root) / "train" / "algorithm" / f"ckpt-{n}"
