"""calf.make_vec: the Gymnasium 1.x vector-env contract over calf's envs.

Trajectories are compared with `calf env` (the program ctest names in CALF_BINARY),
float for float; SAME_STEP autoreset, dtypes, shapes, seeding, errors and the minimal
spaces used when Gymnasium is absent are checked on their values.
"""

from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pytest

import calf

CALF = os.environ.get("CALF_BINARY", "calf")


PLUGIN = os.environ.get("CALF_PLUGIN_EXAMPLE")  # examples/custom_env.c as a plug-in


def calf_env(
    name: str, seed: int, index: int, steps: int, env_lib: str | None = None
) -> dict[str, list]:
    """Run `calf env` and parse it: the first obs, then per step its action, obs,
    reward, terminated, truncated and the obs of the reset that follows (None if none)."""
    cmd = [CALF, "env", name, "--seed", str(seed), "--index", str(index), "--steps", str(steps)]
    if env_lib is not None:
        cmd += ["--env_lib", env_lib]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rec: dict[str, list] = {k: [] for k in ("action", "obs", "reward", "term", "trunc", "reset")}
    first = None
    for line in out.splitlines():
        if line.startswith("# reset "):
            o = np.array(line.split()[2:], dtype=np.float32)
            if first is None:
                first = o
            else:
                rec["reset"][-1] = o
        elif line and not line.startswith("#"):
            f = line.split()
            rec["action"].append(f[1])
            rec["obs"].append(np.array(f[2:-3], dtype=np.float32))
            rec["reward"].append(np.float32(f[-3]))
            rec["term"].append(f[-2] == "1")
            rec["trunc"].append(f[-1] == "1")
            rec["reset"].append(None)
    rec["first"] = [first]
    return rec


@pytest.mark.parametrize(
    "name,steps,plugin",
    [("CartPole-v1", 300, False), ("Pendulum-v1", 450, False), ("Corridor-v0", 100, True)],
)
def test_trajectories_equal_calf_env(name: str, steps: int, plugin: bool) -> None:
    if plugin and not PLUGIN:
        pytest.skip("CALF_PLUGIN_EXAMPLE (the plug-in built from examples/custom_env.c) not set")
    env_lib = PLUGIN if plugin else None
    seed, n = 7, 3
    refs = [calf_env(name, seed, i, steps, env_lib) for i in range(n)]
    envs = calf.make_vec(name, n, seed=seed, env_lib=env_lib)
    obs, infos = envs.reset()
    assert infos == {}
    for i in range(n):
        np.testing.assert_array_equal(obs[i], refs[i]["first"][0])
    ended_episodes = 0
    for k in range(steps):
        if envs.single_action_space.shape == ():
            actions = np.array([int(r["action"][k]) for r in refs])
        else:
            actions = np.array([[np.float32(r["action"][k])] for r in refs], dtype=np.float32)
        obs, rewards, term, trunc, infos = envs.step(actions)
        for i, r in enumerate(refs):
            assert rewards[i] == r["reward"][k], (i, k)
            assert term[i] == r["term"][k] and trunc[i] == r["trunc"][k], (i, k)
            if r["reset"][k] is None:
                np.testing.assert_array_equal(obs[i], r["obs"][k])
                assert "_final_obs" not in infos or not infos["_final_obs"][i]
            else:
                ended_episodes += 1
                np.testing.assert_array_equal(infos["final_obs"][i], r["obs"][k])
                np.testing.assert_array_equal(obs[i], r["reset"][k])
                assert infos["_final_obs"][i]
    assert ended_episodes >= n  # the comparison crossed episode ends (Pendulum: truncation)
    envs.close()


def test_same_step_autoreset() -> None:
    n = 4
    envs = calf.make_vec("CartPole-v1", n, seed=3)
    obs, _ = envs.reset()
    # pushing right ends every CartPole episode within a few dozen steps, at different steps
    seen_end = np.zeros(n, dtype=bool)
    for _ in range(200):
        prev = obs
        obs, rewards, term, trunc, infos = envs.step(np.ones(n, dtype=np.int64))
        ended = term | trunc
        if not ended.any():
            assert infos == {}
            continue
        assert set(infos) == {"final_obs", "_final_obs", "final_info", "_final_info"}
        np.testing.assert_array_equal(infos["_final_obs"], ended)
        assert infos["final_obs"].dtype == object and infos["final_obs"].shape == (n,)
        for i in range(n):
            if ended[i]:
                fo = infos["final_obs"][i]
                assert fo.dtype == np.float32 and fo.shape == (4,)
                # the last obs fell over; the new first obs is a fresh start near 0
                assert abs(fo[2]) > 0.2 or abs(fo[0]) > 2.4
                assert np.all(np.abs(obs[i]) <= 0.05)
                assert not np.array_equal(fo, obs[i])
                assert rewards[i] == 1.0
            else:
                assert infos["final_obs"][i] is None
                assert not np.array_equal(obs[i], prev[i])
        seen_end |= ended
        if seen_end.all():
            break
    assert seen_end.all()


def test_dtypes_shapes_and_spaces() -> None:
    envs = calf.make_vec("CartPole-v1", 5, seed=0)
    assert envs.num_envs == 5
    mode = envs.metadata["autoreset_mode"]
    assert getattr(mode, "value", mode) == "SameStep"  # AutoresetMode.SAME_STEP or its value
    so, sa = envs.single_observation_space, envs.single_action_space
    assert so.shape == (4,) and so.dtype == np.float32
    assert sa.n == 2 and sa.shape == ()
    assert envs.observation_space.shape == (5, 4) and envs.observation_space.dtype == np.float32
    assert envs.action_space.shape == (5,)
    obs, _ = envs.reset()
    assert obs.dtype == np.float32 and obs.shape == (5, 4) and obs.flags.c_contiguous
    assert obs in envs.observation_space
    a = envs.action_space.sample()
    assert a in envs.action_space
    obs, rew, term, trunc, _ = envs.step(a)
    assert obs.dtype == np.float32 and obs.shape == (5, 4)
    assert rew.dtype == np.float64 and rew.shape == (5,)
    assert term.dtype == np.bool_ and term.shape == (5,)
    assert trunc.dtype == np.bool_ and trunc.shape == (5,)

    pend = calf.make_vec("Pendulum-v1", 2, seed=1)
    sa = pend.single_action_space
    assert sa.shape == (1,) and sa.dtype == np.float32
    np.testing.assert_array_equal(sa.low, [-2.0])
    np.testing.assert_array_equal(sa.high, [2.0])
    assert pend.action_space.shape == (2, 1)
    assert pend.max_episode_steps == 200
    envs.close()
    pend.close()


def test_continuous_actions_are_clipped_to_the_bounds() -> None:
    a, b = calf.make_vec("Pendulum-v1", 2, seed=5), calf.make_vec("Pendulum-v1", 2, seed=5)
    for _ in range(5):
        ra = a.step(np.array([[7.5], [-3.0]]))
        rb = b.step(np.array([[2.0], [-2.0]], dtype=np.float32))
        for x, y in zip(ra[:4], rb[:4]):
            np.testing.assert_array_equal(x, y)


def test_seeding() -> None:
    envs = calf.make_vec("CartPole-v1", 3, seed=11)
    first, _ = envs.reset()
    envs.step(np.zeros(3, dtype=np.int32))
    again, _ = envs.reset()  # unseeded: each env's next episode
    assert not np.array_equal(first, again)
    seeded, _ = envs.reset(seed=11)  # reopened as the job seeded 11
    np.testing.assert_array_equal(seeded, first)
    other = calf.make_vec("CartPole-v1", 3, seed=12).reset()[0]
    np.testing.assert_array_equal(envs.reset(seed=12)[0], other)
    assert not np.array_equal(other, first)
    # env i is the job's env i: the second env of a 3-env block is `--index 1`
    ref = calf_env("CartPole-v1", 11, 1, 0)
    np.testing.assert_array_equal(seeded[1], ref["first"][0])
    big = calf.make_vec("CartPole-v1", 1, seed=2**64 - 1).reset()[0]
    np.testing.assert_array_equal(big[0], calf_env("CartPole-v1", 2**64 - 1, 0, 0)["first"][0])


def test_errors_are_exceptions_with_calf_messages() -> None:
    with pytest.raises(ValueError, match=r"unknown environment 'NoSuchEnv-v9'.*CartPole-v1"):
        calf.make_vec("NoSuchEnv-v9", 2)
    with pytest.raises(ValueError, match=r"no/such/plugin\.so"):
        calf.make_vec("Corridor-v0", 2, env_lib="no/such/plugin.so")
    with pytest.raises(ValueError, match="count"):
        calf.make_vec("CartPole-v1", 0)
    with pytest.raises(ValueError, match="out of range"):
        calf.make_vec("CartPole-v1", 1, seed=-1)
    with pytest.raises(TypeError, match="seed"):
        calf.make_vec("CartPole-v1", 1, seed=1.5)
    envs = calf.make_vec("CartPole-v1", 3, seed=0)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        envs.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(TypeError, match="integers"):
        envs.step(np.zeros(3, dtype=np.float32))
    with pytest.raises(ValueError, match="row 1|env 1"):
        envs.step(np.array([0, 2, 1]))
    with pytest.raises(ValueError, match="out of range"):
        envs.step(np.array([0, 1, 2**40]))
    with pytest.raises(ValueError, match="options"):
        envs.reset(options={"reset_mask": np.ones(3, dtype=bool)})
    pend = calf.make_vec("Pendulum-v1", 2)
    with pytest.raises(ValueError, match=r"shape \(2, 1\)"):
        pend.step(np.zeros(2, dtype=np.float32))
    envs.close()
    envs.close()  # a second close does nothing
    assert envs.closed
    with pytest.raises(ValueError, match="closed"):
        envs.step(np.zeros(3, dtype=np.int32))
    with pytest.raises(ValueError, match="closed"):
        envs.reset()
    # a seeded reset reopened the block while `closed` stayed True (issue 40, item 13)
    with pytest.raises(ValueError, match="closed"):
        envs.reset(seed=5)
    assert envs.closed
    with pytest.raises(ValueError, match="closed"):
        envs.step(np.zeros(3, dtype=np.int32))


def test_extension_checks_its_arrays() -> None:
    raw = calf.VecEnv("CartPole-v1", 2, 0)._raw
    good = dict(
        a=np.zeros(2, np.int32), o=np.empty((2, 4), np.float32), r=np.empty(2),
        te=np.empty(2, bool), tr=np.empty(2, bool), f=np.empty((2, 4), np.float32),
    )
    raw.step(*good.values())
    with pytest.raises(TypeError, match="obs must have dtype float32"):
        raw.reset(np.empty((2, 4)))
    with pytest.raises(ValueError, match=r"obs must have shape \(2, 4\)"):
        raw.reset(np.empty((2, 3), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        raw.reset(np.empty((4, 2), np.float32).T)
    with pytest.raises(TypeError, match="rewards must have dtype float64"):
        raw.step(*{**good, "r": np.empty(2, np.float32)}.values())
    with pytest.raises(TypeError, match="ndarray"):
        raw.step(*{**good, "te": [False, False]}.values())
    # the other byte order has the dtype's number but not its bytes: refused, not misread
    swapped = "<" if np.little_endian is False else ">"
    with pytest.raises(ValueError, match="not this machine's byte order"):
        raw.reset(np.empty((2, 4), swapped + "f4"))
    with pytest.raises(ValueError, match="not this machine's byte order"):
        raw.step(*{**good, "a": np.zeros(2, swapped + "i4")}.values())


def test_features_and_version_as_calf_says() -> None:
    out = subprocess.run([CALF, "--version"], check=True, capture_output=True, text=True).stdout
    m = re.match(r"calf (\S+) \(MPI backend: (.*); MuJoCo envs: (.*)\)\n"
                 r"videos \(calf play --video\): (.*)\nkernels: (.*)$", out.strip())
    assert m, out
    assert calf.__version__ == m.group(1)
    assert calf.features() == {"mpi": m.group(2), "mujoco": m.group(3), "video": m.group(4),
                               "kernels": m.group(5)}
    assert "CartPole-v1" in calf.env_names() and "Pendulum-v1" in calf.env_names()


def test_minimal_spaces_without_gymnasium() -> None:
    try:
        import gymnasium  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gymnasium is installed: calf uses gymnasium.spaces")
    envs = calf.make_vec("CartPole-v1", 3)
    assert isinstance(envs.single_action_space, calf.Discrete)
    assert isinstance(envs.action_space, calf.MultiDiscrete)
    assert isinstance(envs.single_observation_space, calf.Box)
    d = calf.Discrete(3, seed=1)
    assert d.contains(np.int64(2)) and not d.contains(3) and not d.contains(1.0)
    draws = [int(d.sample()) for _ in range(200)]
    assert set(draws) == {0, 1, 2}
    d.seed(4)
    again = [int(d.sample()) for _ in range(5)]
    d.seed(4)
    assert again == [int(d.sample()) for _ in range(5)]
    box = calf.Box(np.array([-1.0, 0.0]), np.array([1.0, np.inf]), dtype=np.float32, seed=0)
    assert box.shape == (2,) and box.dtype == np.float32 and box.low.dtype == np.float32
    for _ in range(100):
        s = box.sample()
        assert s.dtype == np.float32 and s in box
    assert not box.contains(np.array([2.0, 0.0], np.float32))
    assert not box.contains(np.array([0.0, -1.0], np.float32))
    assert not box.contains(np.zeros(3, np.float32))
    md = envs.action_space
    assert md.shape == (3,) and list(md.nvec) == [2, 2, 2] and md.dtype == np.int64
    assert md.contains(md.sample()) and not md.contains(np.array([0, 2, 0]))


def test_threads_step_their_own_envs_as_one_thread_does() -> None:
    import threading

    def run(out: list, seed: int) -> None:
        envs = calf.make_vec("Pendulum-v1", 16, seed=seed)
        rows = [envs.step(np.full((16, 1), 0.5))[0] for _ in range(300)]
        out.append(np.stack(rows))
        envs.close()

    alone: list = []
    run(alone, 1)
    run(alone, 2)
    together: list = [[], []]
    threads = [threading.Thread(target=run, args=(together[k], k + 1)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(together[0][0], alone[0])
    np.testing.assert_array_equal(together[1][0], alone[1])


def first_steps(name: str, seed: int, forms: list) -> list[tuple]:
    """(obs, rewards, terminations, truncations) of the first step of a fresh block of
    len(forms[0]) envs, for each form of the actions."""
    out = []
    for a in forms:
        envs = calf.make_vec(name, len(forms[0]), seed=seed)
        envs.reset()
        out.append(envs.step(a)[:4])
    return out


def assert_steps_alike(results: list[tuple]) -> None:
    for r in results[1:]:
        for got, want in zip(r, results[0]):
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype


def test_action_forms_step_alike() -> None:
    """Every form of actions step_gym converts in C (int32 taken as is; other integer
    dtypes, strided views, lists; float64 and integer actions of a continuous env) gives
    the same step as int32/float32, and values that do not fit calf's int are refused."""
    base = np.array([0, 1, 1, 0, 1], dtype=np.int32)
    assert_steps_alike(first_steps("CartPole-v1", 3, [
        base, base.astype(np.int64), base.astype(np.uint8), base.astype(np.uint64),
        np.repeat(base.astype(np.int64), 2)[::2], base.tolist(),
    ]))
    envs = calf.make_vec("CartPole-v1", 5, seed=3)
    with pytest.raises(ValueError, match=f"action {2**64 - 1} of env 2 is out of range 0..1"):
        envs.step(np.array([0, 1, 2**64 - 1, 0, 0], dtype=np.uint64))
    with pytest.raises(ValueError, match="action -1 of env 0 is out of range"):
        envs.step(np.array([-1, 1, 1, 0, 0], dtype=np.int8))
    with pytest.raises(TypeError, match="numpy.ndarray"):
        envs._raw.step_gym([0, 1, 1, 0, 1])

    # the other byte order, converted (2.0 in '>f4' read as this machine's bytes is ~0)
    swapped = "<" if np.little_endian is False else ">"
    assert_steps_alike(first_steps("CartPole-v1", 3, [base, base.astype(swapped + "i4")]))

    cont = np.array([[-0.5], [1.5], [2.0], [-3.0], [0.25]], dtype=np.float32)
    assert_steps_alike(first_steps("Pendulum-v1", 4, [
        cont, cont.astype(np.float64), np.asfortranarray(np.repeat(cont, 2, axis=1))[:, :1],
        cont.tolist(), cont.astype(swapped + "f4"),
    ]))
    whole = np.array([[0.0], [1.0], [2.0], [-3.0], [0.0]], dtype=np.float32)
    # integers, cast to float32
    assert_steps_alike(first_steps("Pendulum-v1", 4, [whole, whole.astype(np.int64)]))
