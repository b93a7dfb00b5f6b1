"""The front door: calf.train and calf.Trainer without a gin file (algorithm=, env=,
total_timesteps=, SB3's and CleanRL's names), conf_text=, callback= and eval_freq=,
calf.list_bindings(), and the README's table of names held to the one in calf._names.

Each check is shown to fail on a planted mistake: the runs' bytes are compared with
the calf program's for the same bindings (and a seed changed makes them differ), the
converted names' values are asserted, and the table's test runs on a mutated table.
"""

from __future__ import annotations

import math
import pathlib
import re
import subprocess

import numpy as np
import pytest

import calf
from calf import _conf, _names

from calf_runs import CALF, SRC, calf_train, checkpoints

# a tiny PPO CartPole job: 8 envs x 16 steps = 128 env steps an iteration, 4 iterations
SHORT = dict(n_envs=8, n_steps=16, batch_size=64, n_epochs=2, net_arch=[16], gamma=0.98,
             gae_lambda=0.8, ent_coef=0.01)
BINDINGS = [
    "create_environment.num_parallel_environments=8",
    "TrainerConfig.unroll_length=16",
    "TrainerConfig.mini_batch_size=64",
    "TrainerConfig.num_updates_per_train_iter=2",
    "ActorDistributionNetwork.fc_layer_params=(16,)",
    "ValueNetwork.fc_layer_params=(16,)",
    "PPOLoss.gamma=0.98",
    "PPOLoss.td_lambda=0.8",
    "PPOLoss.entropy_regularization=0.01",
    "TrainerConfig.num_env_steps=512",
    "TrainerConfig.num_iterations=0",
    "TrainerConfig.random_seed=3",
    "TrainerConfig.num_checkpoints=2",
]


def _cli(root: pathlib.Path, params: list[str]) -> dict[str, bytes]:
    empty = root.parent / f"{root.name}.gin"
    empty.write_text("")
    calf_train(root, ["TrainerConfig.algorithm_ctor=@PPOAlgorithm", *params], conf=empty)
    return checkpoints(root)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return _cli(tmp_path_factory.mktemp("cli") / "run", BINDINGS)


@pytest.mark.parametrize("nproc", [1, 2])
def test_no_gin_file(tmp_path: pathlib.Path, reference: dict[str, bytes], nproc: int) -> None:
    calf.train(algorithm="ppo", env="CartPole-v1", total_timesteps=512, root_dir=tmp_path / "py",
               seed=3, nproc=nproc, quiet=True, overrides={"TrainerConfig.num_checkpoints": 2},
               **SHORT)
    got = checkpoints(tmp_path / "py")
    assert sorted(got) == ["ckpt-2", "ckpt-4"] and got == reference
    gin = (tmp_path / "py" / "config.gin").read_text()
    assert "PPOLoss.gamma = 0.97999999999999998  # --conf_param" in gin  # %.17g
    assert "TrainerConfig.num_env_steps = 512  # --conf_param" in gin


def test_planted_seed_differs(tmp_path: pathlib.Path, reference: dict[str, bytes]) -> None:
    # the comparison above can fail: the same call with another seed writes other bytes
    calf.train(algorithm="PPOAlgorithm", env="CartPole-v1", total_timesteps=512, seed=4,
               root_dir=tmp_path / "py", quiet=True,
               overrides={"TrainerConfig.num_checkpoints": 2}, **SHORT)
    got = checkpoints(tmp_path / "py")
    assert sorted(got) == sorted(reference) and got["ckpt-4"] != reference["ckpt-4"]


def test_binding_names_and_trainer(tmp_path: pathlib.Path, reference: dict[str, bytes]) -> None:
    # calf's own names as keyword arguments, stepped by calf.Trainer: the same bytes
    typed = {
        "create_environment.num_parallel_environments": 8, "TrainerConfig.unroll_length": 16,
        "TrainerConfig.mini_batch_size": 64, "TrainerConfig.num_updates_per_train_iter": 2,
        "ActorDistributionNetwork.fc_layer_params": (16,),
        "ValueNetwork.fc_layer_params": (16,), "PPOLoss.gamma": 0.98, "PPOLoss.td_lambda": 0.8,
        "PPOLoss.entropy_regularization": 0.01,
    }
    with calf.Trainer(algorithm="ppo", env="CartPole-v1", total_timesteps=512, seed=3,
                      root_dir=tmp_path / "py", overrides={"TrainerConfig.num_checkpoints": 2},
                      **typed) as t:
        while not t.done:
            t.step()
    assert checkpoints(tmp_path / "py") == reference


def test_conf_text(tmp_path: pathlib.Path, reference: dict[str, bytes]) -> None:
    text = "TrainerConfig.algorithm_ctor = @PPOAlgorithm\n" + "\n".join(
        b.replace("=", " = ", 1) for b in BINDINGS) + "\n"
    for nproc in (1, 2):
        calf.train(conf_text=text, root_dir=tmp_path / f"n{nproc}", nproc=nproc, quiet=True)
        assert checkpoints(tmp_path / f"n{nproc}") == reference
    with pytest.raises(ValueError, match=r"<conf_text>:2: "):
        calf.train(conf_text="TrainerConfig.num_iterations = 3\nnot gin (\n",
                   root_dir=tmp_path / "bad", quiet=True)
    gin = tmp_path / "x.gin"
    gin.write_text(text)
    for f in (calf.train, calf.Trainer):
        with pytest.raises(ValueError, match="conf and conf_text are both given"):
            f(gin, conf_text=text, root_dir=tmp_path / "both")
    assert not (tmp_path / "both").exists()


def _params(**kw) -> list[str]:
    base = dict(conf=None, conf_text=None, root_dir="/nonexistent", algorithm=None, env=None,
                total_timesteps=None, seed=None, overrides=None, eval_freq=None,
                n_eval_episodes=None)
    hyper = {k: kw.pop(k) for k in list(kw) if k not in base}
    return _conf._front_params("t", **{**base, **kw}, hyperparameters=hyper)[1]


def test_short_names_per_algorithm() -> None:
    assert _params(algorithm="ppo", gamma=0.9, clip_coef=0.1, learning_rate=1e-3) == [
        "TrainerConfig.algorithm_ctor=@PPOAlgorithm", "PPOLoss.gamma=0.9",
        "PPOLoss.importance_ratio_clipping=0.1", "Adam.lr=0.001"]
    # gamma is the TD loss's for the off-policy algorithms; CleanRL's q_lr sets two rows
    assert _params(algorithm="sac", gamma=0.9, q_lr=1e-3, learning_starts=100) == [
        "TrainerConfig.algorithm_ctor=@SacAlgorithm", "OneStepTDLoss.gamma=0.9",
        "critic/Adam.lr=0.001", "alpha/Adam.lr=0.001", "TrainerConfig.initial_collect_steps=100"]
    # converted units, with the rest of the config in effect: DQN's defaults are 1 env,
    # 10 steps and 1 update an iteration, so 500 env steps are 50 updates
    assert _params(algorithm="dqn", target_update_interval=500)[-1] == (
        "DqnAlgorithm.target_update_period=50")
    assert _params(algorithm="dqn", target_update_interval=500, train_freq=4,
                   gradient_steps=2)[-1] == "DqnAlgorithm.target_update_period=250"
    assert _params(algorithm="sac", n_envs=4, buffer_size=10001)[-1] == (
        "TrainerConfig.replay_buffer_length=2501")
    assert _params(algorithm="ppo", n_envs=8, n_steps=32, num_minibatches=4)[-1] == (
        "TrainerConfig.mini_batch_size=64")
    assert _params(algorithm="dqn", net_arch=[32, 32])[-1] == "q/QNetwork.fc_layer_params=(32, 32)"
    # CleanRL's clip_vloss: its clip_coef, the one in effect (the config's default 0.2 or
    # the call's), as PPOLoss.value_clipping; False turns it off
    assert _params(algorithm="ppo", clip_vloss=True)[-1] == "PPOLoss.value_clipping=0.2"
    assert _params(algorithm="ppo", clip_coef=0.1, clip_vloss=True)[-1] == (
        "PPOLoss.value_clipping=0.1")
    assert _params(algorithm="ppo", clip_vloss=False)[-1] == "PPOLoss.value_clipping=0.0"
    # the algorithm comes from the config when the call does not name it
    conf = str(SRC / "examples" / "sac_pendulum.gin")
    assert _params(conf=conf, tau=0.01)[-1] == "SacAlgorithm.target_update_tau=0.01"
    # one budget: total_timesteps replaces whatever the config says of iterations
    assert _params(total_timesteps=1000)[-2:] == [
        "TrainerConfig.num_env_steps=1000", "TrainerConfig.num_iterations=0"]
    # evaluation every eval_freq env steps, rounded up to whole iterations (64 x 32)
    assert _params(eval_freq=5000, n_eval_episodes=3)[-3:] == [
        "TrainerConfig.num_eval_episodes=3", "TrainerConfig.evaluate=True",
        "TrainerConfig.eval_interval=3"]


def test_sb3_schedules() -> None:
    # the zoo's 'lin_X' and SB3's linear_schedule(X) are X with calf's linear schedule
    lin = ['Adam.lr_schedule="linear"', "Adam.lr=0.001"]
    assert _params(algorithm="ppo", learning_rate="lin_1e-3")[1:] == lin
    assert _params(algorithm="sac", learning_rate=lambda p: p * 1e-3)[1:] == lin
    assert _params(algorithm="ppo", learning_rate=lambda p: 3e-4)[1:] == [
        'Adam.lr_schedule="constant"', "Adam.lr=0.0003"]
    assert _params(algorithm="ppo", learning_rate=3e-4)[1:] == ["Adam.lr=0.0003"]
    # CleanRL's anneal_lr
    assert _params(algorithm="ppo", anneal_lr=True)[1:] == ['Adam.lr_schedule="linear"']
    assert _params(algorithm="ppo", anneal_lr=False)[1:] == ['Adam.lr_schedule="constant"']
    with pytest.raises(TypeError, match="anneal_lr and learning_rate both set Adam.lr_schedule"):
        _params(algorithm="ppo", learning_rate="lin_1e-3", anneal_lr=True)
    # what has no calf equivalent is refused by name
    with pytest.raises(ValueError, match=r"learning_rate='exp_1e-3': calf takes a number or"):
        _params(algorithm="ppo", learning_rate="exp_1e-3")
    with pytest.raises(ValueError, match=r"neither \(at progress_remaining 1, 1/2, 0: 0.001, "
                                         r"0.00055, 0.0001\)"):
        _params(algorithm="ppo", learning_rate=lambda p: 1e-4 + p * 9e-4)
    # every algorithm reads the schedule (test_lr_schedule.c: the replay algorithms'
    # updates at iteration k are those of lr x (1 - k/N))
    for algo in ("td3", "ddpg", "dqn"):
        assert _params(algorithm=algo, learning_rate="lin_1e-3")[1:] == lin
        assert _params(algorithm=algo, learning_rate=lambda p: p * 1e-3)[1:] == lin
    with pytest.raises(ValueError, match="clip_range='lin_0.2': SB3's schedules are taken for "
                                         "learning_rate alone"):
        _params(algorithm="ppo", clip_range="lin_0.2")
    with pytest.raises(ValueError, match="taken for learning_rate alone"):
        _params(algorithm="ppo", clip_range=lambda p: 0.2)
    with pytest.raises(TypeError, match="anneal_lr must be a bool"):
        _params(algorithm="ppo", anneal_lr=1)


def test_planted_schedule_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # the check of a callable is not fooled by a schedule linear only where it is read
    # at 1 and 0 (a planted reader of two points would take this one)
    monkeypatch.setattr(_names, "_PROGRESS", (1.0, 0.0))
    assert _params(algorithm="ppo", learning_rate=lambda p: 1e-3 * p * p)[1:] == [
        'Adam.lr_schedule="linear"', "Adam.lr=0.001"]
    monkeypatch.undo()
    with pytest.raises(ValueError, match="this one is neither"):
        _params(algorithm="ppo", learning_rate=lambda p: 1e-3 * p * p)


def test_reference_in_a_dict_override() -> None:
    # "@SacAlgorithm" as a dict value is the reference where the binding takes one (it
    # was written as a quoted string, which the config refuses), a string elsewhere
    assert _conf._conf_params({"TrainerConfig.algorithm_ctor": "@SacAlgorithm",
                               "create_environment.env_name": "@x"}) == [
        "TrainerConfig.algorithm_ctor=@SacAlgorithm", 'create_environment.env_name="@x"']


def test_schedule_refused_where_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    # an algorithm that does not read Adam.lr_schedule is refused one by name
    monkeypatch.setattr(_names, "LR_SCHEDULED", ("ppo", "sac"))
    with pytest.raises(ValueError, match=r"dqn has no learning-rate schedule in calf \(only "
                                         r"ppo, sac\)"):
        _params(algorithm="dqn", learning_rate="lin_1e-3")
    assert _params(algorithm="dqn", learning_rate=1e-3)[1:] == ["Adam.lr=0.001"]


def test_planted_conversion_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # the assertion on DQN's period fails when the conversion forgets gradient_steps
    row = _names.lookup("target_update_interval")
    wrong = _names.Derived(row.to["dqn"].binding, lambda v, cfg: max(1, round(
        int(v) / _names._envs_x_steps(cfg))), "planted")
    monkeypatch.setitem(row.to, "dqn", wrong)
    assert _params(algorithm="dqn", target_update_interval=500, train_freq=4,
                   gradient_steps=2)[-1] != "DqnAlgorithm.target_update_period=250"


def test_name_errors(tmp_path: pathlib.Path) -> None:
    with pytest.raises(TypeError, match=r"unknown hyperparameter 'n_step' \(did you mean 'n_steps'"):
        _params(algorithm="ppo", n_step=8)
    with pytest.raises(TypeError, match="ent_coef has no calf binding for sac"):
        _params(algorithm="sac", ent_coef=0.1)
    with pytest.raises(TypeError, match="num_steps and n_steps both set TrainerConfig.unroll_length"):
        _params(algorithm="ppo", n_steps=8, num_steps=8)
    with pytest.raises(TypeError, match="n_steps and TrainerConfig.unroll_length both set"):
        _params(algorithm="ppo", **{"TrainerConfig.unroll_length": 8, "n_steps": 8})
    with pytest.raises(ValueError, match=r"unknown algorithm 'a2c' \(known: ppo, sac, td3, dqn, ddpg\)"):
        _params(algorithm="a2c")
    with pytest.raises(ValueError, match="total_timesteps must be at least 1"):
        _params(total_timesteps=0)
    with pytest.raises(ValueError, match="give nproc=1, not 2"):
        calf.train(algorithm="ppo", env="CartPole-v1", total_timesteps=512, nproc=2,
                   root_dir=tmp_path / "cb", callback=lambda m: None)
    assert not (tmp_path / "cb").exists()


def test_callback_stops_and_resumes(tmp_path: pathlib.Path, reference: dict[str, bytes]) -> None:
    seen = []

    def callback(m: dict) -> bool:
        seen.append(m)
        return m["iteration"] < 3  # stop after the third

    root = tmp_path / "py"
    args = dict(algorithm="ppo", env="CartPole-v1", total_timesteps=512, seed=3,
                overrides={"TrainerConfig.num_checkpoints": 2}, **SHORT)
    # evaluations every 256 env steps: iterations 2 and 4 (and after the last)
    calf.train(root_dir=root, callback=callback, eval_freq=256, n_eval_episodes=2, **args)
    # each iteration, and the evaluation of iteration 2 after it, told apart by "event"
    assert [(m["event"], m["iteration"]) for m in seen] == [
        ("iteration", 1), ("iteration", 2), ("evaluation", 2), ("iteration", 3)]
    assert [m["env_steps"] for m in seen] == [128, 256, 256, 384]
    assert [math.isnan(m["eval_return"]) for m in seen] == [True, False, False, True]
    assert 8 <= seen[1]["eval_return"] <= 500 and seen[2]["eval_return"] == seen[1]["eval_return"]
    assert set(seen[2]) == {"event", "iteration", "env_steps", "eval_return", "eval_return_std",
                            "eval_episode_length", "eval_episodes"}
    assert "steps_per_sec" in seen[0]  # an iteration's is Trainer.step's dict
    assert sorted(checkpoints(root)) == ["ckpt-2", "ckpt-3"]  # the planned one, the stop's
    # calling train again resumes at 3 and ends on the uninterrupted run's bytes
    # (evaluation changes no checkpoint)
    calf.train(root_dir=root, eval_freq=256, n_eval_episodes=2, quiet=True, **args)
    assert checkpoints(root)["ckpt-4"] == reference["ckpt-4"]


def test_evaluation_callback_values(tmp_path: pathlib.Path) -> None:
    # an evaluation's figures are those the run's eval events hold, and the last one's
    # those of the final checkpoint's greedy episodes as calf play replays them
    evals = []
    root = tmp_path / "ev"
    calf.train(root_dir=root, algorithm="ppo", env="CartPole-v1", total_timesteps=512, seed=3,
               eval_freq=256, n_eval_episodes=5, quiet=True, **SHORT,
               callback=lambda m: evals.append(m) if m["event"] == "evaluation" else None)
    assert [m["iteration"] for m in evals] == [2, 4]
    ev = calf.read_scalars(root)["eval"]
    for k, m in enumerate(evals):
        assert m["eval_episodes"] == 5
        assert ev["Metrics/EnvironmentSteps"].steps[k] == m["iteration"]
        assert ev["Metrics/EnvironmentSteps"].values[k] == m["env_steps"] == 128 * m["iteration"]
        assert ev["Metrics/AverageReturn"].values[k] == np.float32(m["eval_return"])
        assert ev["Metrics/AverageEpisodeLength"].values[k] == np.float32(m["eval_episode_length"])
        # CartPole pays 1 a step: the mean length is the mean return (an episode's
        # ending step left uncounted would make it 1 less)
        assert m["eval_episode_length"] == m["eval_return"]
    out = subprocess.run([CALF, "play", "--root_dir", str(root), "--num_episodes", "5",
                          "--seed", "3"], capture_output=True, text=True, check=True).stdout
    returns = [float(r) for r in re.findall(r"^episode \d+: return (\S+)$", out, re.M)]
    assert len(returns) == 5 and len(set(returns)) > 1  # a spread to check
    assert evals[-1]["eval_return"] == pytest.approx(np.mean(returns), abs=1e-9)
    assert evals[-1]["eval_return_std"] == pytest.approx(np.std(returns), abs=1e-9)
    # planted: the sample std (ddof=1) is another figure, which that check tells apart
    assert evals[-1]["eval_return_std"] != pytest.approx(np.std(returns, ddof=1), abs=1e-9)


def test_callback_stops_at_an_evaluation(tmp_path: pathlib.Path,
                                         reference: dict[str, bytes]) -> None:
    seen = []

    def callback(m: dict) -> bool:
        seen.append((m["event"], m["iteration"]))
        return m["event"] != "evaluation"  # stop at the first evaluation (iteration 2)

    root = tmp_path / "py"
    args = dict(algorithm="ppo", env="CartPole-v1", total_timesteps=512, seed=3,
                overrides={"TrainerConfig.num_checkpoints": 1}, **SHORT)
    calf.train(root_dir=root, callback=callback, eval_freq=256, n_eval_episodes=2, **args)
    assert seen == [("iteration", 1), ("iteration", 2), ("evaluation", 2)]
    assert sorted(checkpoints(root)) == ["ckpt-2"]  # the stop's (the run plans only ckpt-4)
    calf.train(root_dir=root, eval_freq=256, n_eval_episodes=2, quiet=True, **args)
    assert checkpoints(root)["ckpt-4"] == reference["ckpt-4"]


def test_callback_exception_checkpoints(tmp_path: pathlib.Path) -> None:
    def callback(m: dict) -> None:
        if m["iteration"] == 2:
            raise RuntimeError("planted")

    with pytest.raises(RuntimeError, match="planted"):
        calf.train(algorithm="ppo", env="CartPole-v1", total_timesteps=512, quiet=True,
                   root_dir=tmp_path / "py", callback=callback,
                   overrides={"TrainerConfig.num_checkpoints": 1}, **SHORT)
    assert sorted(checkpoints(tmp_path / "py")) == ["ckpt-2"]  # the run plans only ckpt-4


def test_list_bindings() -> None:
    every = {b["name"]: b for b in calf.list_bindings()}
    ppo = {b["name"]: b for b in calf.list_bindings("ppo")}
    sac = {b["name"]: b for b in calf.list_bindings("sac")}
    dqn = {b["name"]: b for b in calf.list_bindings("DqnAlgorithm")}
    assert "PPOLoss.gamma" in every and "SacAlgorithm.target_update_tau" in every
    assert "PPOLoss.gamma" in ppo and "PPOLoss.gamma" not in sac
    assert "SacAlgorithm.target_update_tau" in sac and "SacAlgorithm.target_update_tau" not in ppo
    assert ppo["PPOLoss.gamma"]["names"] == ["gamma"]
    assert ppo["PPOLoss.gamma"]["algorithm"] == "PPOAlgorithm"
    assert sac["OneStepTDLoss.gamma"]["names"] == ["gamma"]
    assert (sac["actor/Adam.lr"]["default"], sac["actor/Adam.lr"]["default_from"]) == (
        "3e-4", "SacAlgorithm")
    assert sac["actor/Adam.lr"]["fallback"] == "Adam.lr"
    assert (ppo["TrainerConfig.unroll_length"]["default"],
            ppo["TrainerConfig.unroll_length"]["default_from"]) == ("32", "calf")
    assert (dqn["TrainerConfig.unroll_length"]["default"],
            dqn["TrainerConfig.unroll_length"]["default_from"]) == ("10", "DqnAlgorithm")
    assert set(dqn["TrainerConfig.unroll_length"]["names"]) == {
        "n_steps", "num_steps", "train_freq", "train_frequency"}
    assert every["TrainerConfig.algorithm_ctor"]["choices"] == [
        "PPOAlgorithm", "SacAlgorithm", "Td3Algorithm", "DqnAlgorithm", "DdpgAlgorithm"]
    assert every["Adam.lr_schedule"]["type"] == "str"
    assert every["SacAlgorithm.target_entropy"]["optional"] is True
    # the same rows as `calf train --list-bindings`
    import subprocess
    out = subprocess.run([CALF, "train", "--list-bindings"], capture_output=True, text=True,
                         check=True).stdout
    listed = [line for line in out.splitlines() if line and not line.startswith(" ")]
    assert sorted(listed) == sorted(every)


def _readme_table(readme: str) -> str:
    start = readme.index("| SB3 | CleanRL |")
    end = readme.index("\n\n", start)
    return readme[start:end + 1]


def test_readme_table_is_the_api_table(monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (SRC / "README.md").read_text()
    assert _readme_table(readme) == _names.markdown()
    # planted: a row the API maps differently than the README says
    row = _names.lookup("gae_lambda")
    monkeypatch.setitem(row.to, "ppo", "PPOLoss.gamma")
    assert _readme_table(readme) != _names.markdown()
