"""Pictures from Python: VecEnv.render() (Gymnasium's rgb_array) and Policy.record(),
calf play --video from a loaded policy. Skipped, with the reason, in a calf built
without video support."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import calf
import pyenv_envs  # beside this file, as calf_runs
from calf_runs import CALF, CARTPOLE, OVERRIDES

VIDEO = calf.features()["video"]
pytestmark = pytest.mark.skipif(not VIDEO.startswith("built in"), reason=f"video: {VIDEO}")


def probe(video) -> str:
    """ffprobe's "codec,width,height,frames" of a video file's stream."""
    return subprocess.run(
        ["ffprobe", "-v", "error", "-count_frames", "-show_entries",
         "stream=codec_name,width,height,nb_read_frames", "-of", "csv=p=0", str(video)],
        capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1", "HalfCheetah-v4"])
def test_render_draws_each_env_and_never_changes_a_step(name):
    if name.endswith("-v4") and "MuJoCo" not in VIDEO:
        pytest.skip(f"MuJoCo envs cannot be drawn here: {VIDEO}")
    drawn, plain = calf.make_vec(name, 3, seed=4, render_size=(80, 60)), calf.make_vec(name, 3, seed=4)
    obs_d, _ = drawn.reset()
    plain.reset()
    first = drawn.render()
    assert len(first) == 3 and all(f.shape == (60, 80, 3) and f.dtype == np.uint8 for f in first)
    assert drawn.metadata["render_fps"] > 0 and drawn.render_mode == "rgb_array"
    for f in first:  # not blank: pixels other than the background's
        assert (f != f[0, 0]).any(axis=-1).mean() > 0.005
    assert not np.array_equal(first[0], first[1])  # different start states, different pictures
    assert all(np.array_equal(a, b) for a, b in zip(first, drawn.render()))  # same state, same
    act = np.zeros((3,) + drawn.single_action_space.shape, drawn.single_action_space.dtype)
    for _ in range(5):
        od = drawn.step(act)[0]
        drawn.render()
        op = plain.step(act)[0]
        assert np.array_equal(od, op)  # drawing never changes what a step computes
    assert not np.array_equal(first[0], drawn.render()[0])  # the state moved, the picture too
    drawn.close()
    plain.close()


def test_render_refuses_what_cannot_be_drawn():
    name = calf.register_env(pyenv_envs.make_corridor, max_episode_steps=60)
    v = calf.make_vec(name, 2)
    v.reset()
    with pytest.raises(ValueError, match="cannot be drawn: render.. raised AttributeError"):
        v.render()  # Corridor has no render()
    v.close()


class Painted(pyenv_envs.Corridor):
    """A Corridor that draws itself: a 4x2 picture, its x position as the red level."""

    metadata = {"render_fps": 25}

    def render(self):
        pic = np.zeros((2, 4, 3), np.uint8)
        pic[:, :, 0] = int(np.clip((self.x + 2) * 60, 0, 255))
        pic[0, 0] = (0, 255, 0)
        return pic


def make_painted():
    return Painted()


def test_python_envs_draw_through_their_own_render(tmp_path):
    name = calf.register_env(make_painted, max_episode_steps=60)
    v = calf.make_vec(name, 2, seed=1, render_size=(8, 4))
    v.reset()
    frames = v.render()
    assert v.metadata["render_fps"] == 25
    for f in frames:  # nearest-pixel scaling of the 4x2 picture to 8x4
        assert f.shape == (4, 8, 3)
        assert (f[:2, :2] == (0, 255, 0)).all() and (f[2:, 2:, 1] == 0).all()
    assert frames[0][3, 7, 0] != frames[1][3, 7, 0]  # two start positions, two reds
    v.close()
    # a video of a Python env: python3 -m calf play --env_py ... --video
    root = tmp_path / "run"
    with calf.Trainer(CARTPOLE, root_dir=root, env=name,
                      overrides={**OVERRIDES, "create_environment.num_parallel_environments": 4,
                                 "TrainerConfig.mini_batch_size": 64}) as t:
        while not t.done:
            t.step()
    report = calf.load_policy(root).record(tmp_path / "p.gif", width=8, height=4, max_frames=5)
    assert "average" in report.lower()
    if shutil.which("ffprobe"):
        assert probe(tmp_path / "p.gif") == "gif,8,4,5"


@pytest.mark.parametrize("ext, codec", [(".gif", "gif"), (".mp4", "h264")])
def test_record_writes_the_video_calf_play_writes(tmp_path, ext, codec):
    root = tmp_path / "run"
    calf.train(CARTPOLE, root_dir=root, overrides=OVERRIDES, quiet=True)
    pol = calf.load_policy(root)
    report = pol.record(tmp_path / f"a{ext}", num_episodes=2, seed=3, width=64, height=48,
                        max_frames=30)
    assert "average" in report.lower()
    cli = tmp_path / f"b{ext}"
    r = subprocess.run([CALF, "play", "--root_dir", str(root), "--num_episodes", "2",
                        "--seed", "3", "--video", str(cli), "--width", "64", "--height", "48",
                        "--max_frames", "30"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    if ext == ".gif":  # a GIF is the frames, exactly; H.264's encoder may vary its bits
        assert (tmp_path / f"a{ext}").read_bytes() == cli.read_bytes()
    if shutil.which("ffprobe"):
        for video in (tmp_path / f"a{ext}", cli):
            assert probe(video) == f"{codec},64,48,30"
    with pytest.raises(ValueError, match="extension"):
        pol.record(tmp_path / "c.avi")
    assert not (tmp_path / "c.avi").exists()

